"""Shared fixtures: a private ENVDUELS_HOME, registries of simulated models, pipeline resources."""

from __future__ import annotations

from pathlib import Path

import pytest


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


def write_registry(path: Path, names: list[str], extra: str = "") -> Path:
    """A registry of simulated models; ``names`` are profile names (oracle, expert, ...)."""
    lines = ["models:"]
    for name in names:
        lines += [f"  - name: {name}", f"    model: envduels-sim/{name}"]
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


@pytest.fixture
def sim_registry(tmp_path: Path):
    def make(names: list[str] = ("oracle", "journeyman", "novice"), extra: str = "") -> Path:
        return write_registry(tmp_path / "models.yaml", list(names), extra)

    return make


def pipeline_resources(tmp_path: Path, registry: Path, envs_per_author: int = 3, seeds=(0, 1, 2, 3)) -> dict:
    """Dagster resources writing to a temporary warehouse and cache."""
    from dagster_duckdb import DuckDBResource

    from envduels_dagster.definitions import build_resources
    from envduels_dagster.resources import DuelSettings, GatewayResource

    return build_resources(
        gateway=GatewayResource(registry_path=str(registry), cache_path=str(tmp_path / "cache" / "calls.sqlite")),
        settings=DuelSettings(envs_per_author=envs_per_author, benchmark_seeds=list(seeds)),
        warehouse=DuckDBResource(database=str(tmp_path / "warehouse.duckdb")),
    )
