"""Building blocks shared by tests: registries of simulated models (``write_registry``; ``write_roles`` with roles) and
pipeline resources on temp files."""

from __future__ import annotations

from pathlib import Path


def write_registry(path: Path, names: list[str], extra: str = "") -> Path:
    """A registry of simulated models; ``names`` are profile names (oracle, expert, ...)."""
    lines = ["models:"]
    for name in names:
        lines += [f"  - name: {name}", f"    model: envduels-sim/{name}"]
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


def pipeline_resources(tmp_path: Path, registry: Path, envs_per_author: int = 3, seeds=(0, 1, 2, 3),
                       **settings: object) -> dict:
    """Dagster resources writing to a temporary warehouse and cache; ``settings`` are further DuelSettings fields."""
    from dagster_duckdb import DuckDBResource

    from envduels_dagster.definitions import build_resources
    from envduels_dagster.resources import DuelSettings, GatewayResource

    return build_resources(
        gateway=GatewayResource(registry_path=str(registry), cache_path=str(tmp_path / "cache" / "calls.sqlite")),
        settings=DuelSettings(envs_per_author=envs_per_author, benchmark_seeds=list(seeds), **settings),
        warehouse=DuckDBResource(database=str(tmp_path / "warehouse.duckdb")),
    )


def play_round0(instance, resources: dict, models: list[str]) -> None:
    """Register ``models``, author each one's environments, then play every (author, solver) pair: one run each,
    on ``instance``, as the request sensor's stages would (round 0 only)."""
    import dagster as dg

    from envduels_dagster.assets.authoring.assets import authored_environments
    from envduels_dagster.assets.duels.assets import duel_episodes
    from envduels_dagster.assets.registry.partitions import pair_key, register_models

    register_models(instance, models)
    for m in models:
        assert dg.materialize([authored_environments], instance=instance, resources=resources, partition_key=m).success
    for a in models:
        for s in models:
            assert dg.materialize([duel_episodes], instance=instance, resources=resources,
                                  partition_key=pair_key(a, s)).success


def write_roles(path, entries: dict[str, str | None]):
    """A registry of simulated models; ``entries`` maps a profile name to its roles (None: both, the default)."""
    lines = ["models:"]
    for name, roles in entries.items():
        lines += [f"  - name: {name}", f"    model: envduels-sim/{name}"] + ([f"    roles: {roles}"] if roles else [])
    path.write_text("\n".join(lines) + "\n")
    return path


THREE_AUTHORS_ONE_LEARNER = {"oracle": "[author]", "expert": "[author]", "journeyman": "[author]",
                             "novice": "[solver]"}
