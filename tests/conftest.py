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


# The modules that take longest (measured with --durations, 1 Dec 2026), run first. With `make test`'s two
# xdist workers each module runs on one worker (--dist loadscope), in this order, so the longest ones start
# at once instead of last (longest-first keeps the two workers busy to the end). Order is all this changes.
LONGEST_FIRST = (
    "tests/flows/test_live_flows.py",
    "tests/flows/test_downstream_live.py",
    "tests/core/rankings/test_controls.py",
    "tests/flows/test_shared_pipeline.py",
    "tests/flows/test_browser.py",
    "tests/assets/test_pipeline.py",
    "tests/flows/test_wheel.py",
    "tests/flows/test_published_readers.py",
    "tests/assets/registry/test_incremental.py",
    "tests/flows/test_publish_after_checks.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: in-module order kept
