"""The one Dagster code location: assets, resources (and, as they arrive, checks, sensors, schedules).

Loading this module must stay fast: litellm, dbt and great-expectations are
imported only inside resources and asset bodies.
"""

from __future__ import annotations

import os

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets import ALL_ASSETS
from envduels_dagster.assets.marts import dbt_resource
from envduels_dagster.checks import ALL_CHECKS
from envduels_dagster.jobs import author_job, pair_job
from envduels_dagster.schedules import stale_authors_schedule, stale_pairs_schedule
from envduels_dagster.sensors import automation_sensor, new_models_sensor
from envduels_dagster.core.registry import registry_path
from envduels_dagster.resources import AuthorValueSettings, DuelSettings, GatewayResource, SandboxResource
from envduels_dagster.settings import cache_path, warehouse_path


def build_resources(**overrides: object) -> dict[str, object]:
    """Resources for runs, from ENVDUELS_* environment variables; tests pass overrides."""
    os.environ.setdefault("ENVDUELS_REGISTRY", str(registry_path()))
    resources: dict[str, object] = {
        "gateway": GatewayResource(registry_path=dg.EnvVar("ENVDUELS_REGISTRY"), cache_path=str(cache_path())),
        "sandbox": SandboxResource(),
        "settings": DuelSettings(),
        "value_settings": AuthorValueSettings(),
        "warehouse": DuckDBResource(database=str(warehouse_path())),
        "dbt": dbt_resource(),
    }
    resources.update(overrides)
    return resources


# Runs launched from the UI/daemon execute steps in subprocesses. A forkserver with the heavy
# libraries preloaded spares every step (and every great-expectations check) their ~3-4 s imports.
EXECUTOR = dg.multiprocess_executor.configured({
    "max_concurrent": 2,
    "start_method": {"forkserver": {"preload_modules": ["envduels_dagster.definitions", "great_expectations"]}},
})

defs = dg.Definitions(
    assets=ALL_ASSETS,
    asset_checks=ALL_CHECKS,
    jobs=[author_job, pair_job],
    sensors=[new_models_sensor, automation_sensor],
    schedules=[stale_authors_schedule, stale_pairs_schedule],
    resources=build_resources(),
    executor=EXECUTOR,
)
