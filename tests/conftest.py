"""Shared fixtures: a private ENVDUELS_HOME and registries of simulated models (helpers live in tests/helpers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.pipeline import write_registry


@pytest.fixture(scope="session", autouse=True)
def _private_envduels_home(tmp_path_factory):
    """No test ever writes into the repository's ./data: ENVDUELS_HOME defaults to a session temp dir."""
    import os

    home = tmp_path_factory.mktemp("session-home")
    old = os.environ.get("ENVDUELS_HOME")
    os.environ["ENVDUELS_HOME"] = str(home)
    yield home
    if old is None:
        os.environ.pop("ENVDUELS_HOME", None)
    else:
        os.environ["ENVDUELS_HOME"] = old


@pytest.fixture
def envduels_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point ENVDUELS_HOME (and so warehouse, cache, exports) at a fresh temporary directory."""
    home = tmp_path / "home"
    monkeypatch.setenv("ENVDUELS_HOME", str(home))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    return home


@pytest.fixture
def sim_registry(tmp_path: Path):
    def make(names: list[str] = ("oracle", "journeyman", "novice"), extra: str = "") -> Path:
        return write_registry(tmp_path / "models.yaml", list(names), extra)

    return make
