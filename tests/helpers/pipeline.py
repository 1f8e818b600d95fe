"""Building blocks shared by tests: registries of simulated models and pipeline resources on temp files."""

from __future__ import annotations

from pathlib import Path


def write_registry(path: Path, names: list[str], extra: str = "") -> Path:
    """A registry of simulated models; ``names`` are profile names (oracle, expert, ...)."""
    lines = ["models:"]
    for name in names:
        lines += [f"  - name: {name}", f"    model: envduels-sim/{name}"]
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


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
