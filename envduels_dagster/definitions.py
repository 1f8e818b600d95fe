"""The one Dagster code location (location ``envduels`` in workspace.yaml): every area's definitions, merged.

Why so small: each area (``assets/<area>/definitions.py``) declares its own assets, checks,
jobs, sensors and schedules; the root only merges them and applies what is cross-cutting
(resources, the executor, the automation sensor). Importing this module does nothing but
import Dagster: ``defs`` is lazy (``@dg.definitions``), built when Dagster loads the location
or a caller calls it, and even then nothing is written and no environment variable changes.
File locations are resolved when a run starts (``resources/paths.py``); the dbt manifest is
prepared by ``make install`` / the demo (``assets/marts/project.py``), never by loading.
"""

from __future__ import annotations

import functools

import dagster as dg

AREAS = ("registry", "authoring", "duels", "rounds", "marts", "training", "value", "studies", "report")
# seconds between ticks of the automation sensor (default 30, Dagster's own); read when the location loads
AUTOMATION_INTERVAL_ENV = "ENVDUELS_AUTOMATION_INTERVAL_S"

# Runs launched from the UI/daemon execute steps in subprocesses. A forkserver with the heavy
# libraries preloaded spares every step (and every great-expectations check) their ~3-4 s imports.
EXECUTOR = dg.multiprocess_executor.configured({
    "max_concurrent": 2,
    "start_method": {"forkserver": {"preload_modules": [
        "envduels_dagster.definitions", "dagster_dbt", "pandas", "great_expectations"]}},
})


def build_resources(**overrides: object) -> dict[str, object]:
    """Resources for runs; their paths default to ENVDUELS_REGISTRY / ENVDUELS_HOME, read at run time."""
    from envduels_dagster.assets.marts.dbt import dbt_resource
    from envduels_dagster.resources import AuthorValueSettings, SandboxResource
    from envduels_dagster.resources.duel_settings import settings_from_env
    from envduels_dagster.resources.io_managers import PUBLISHED_IO_MANAGER_KEY, PublishedTableIOManager
    from envduels_dagster.resources.paths import HomeGatewayResource, WarehouseResource

    resources: dict[str, object] = {
        "gateway": HomeGatewayResource(),
        "sandbox": SandboxResource(),
        "settings": settings_from_env(),  # ENVDUELS_ENVS_PER_AUTHOR, ENVDUELS_SEEDS, ENVDUELS_TRAINING_ADMISSION
        "value_settings": AuthorValueSettings(),
        "warehouse": WarehouseResource(),
        "dbt": dbt_resource(),
        PUBLISHED_IO_MANAGER_KEY: PublishedTableIOManager(),  # read-only snapshots of published tables
    }
    resources.update(overrides)
    return resources


@functools.cache
def build_definitions() -> dg.Definitions:
    """Every area's ``defs()`` merged with the shared resources, executor and automation sensor (built once)."""
    import importlib

    from envduels_dagster.assets.registry.sensors import build_requests_sensor
    from envduels_dagster.assets.rounds.definitions import configured_rounds
    from envduels_dagster.settings.variables import check_settings, sensor_interval

    check_settings()  # a bad ENVDUELS_* value fails the load with one line naming it (nothing is written)

    areas = [importlib.import_module(f"envduels_dagster.assets.{area}.definitions").defs() for area in AREAS]
    # One sensor launches every area's jobs in request stages (registry/sensors.py), so it is built here,
    # once every area's jobs are known.
    requests = build_requests_sensor(configured_rounds(), [job for area in areas for job in area.jobs or []])
    # Dagster's default automation sensor starts stopped; this one runs. Only the training export opts in
    # (after its training set's blocking checks passed): marts, rankings and training sets are refreshed
    # by envduels_requests, once per request.
    automation = dg.AutomationConditionSensorDefinition(
        "envduels_automation", target=dg.AssetSelection.all(), default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=sensor_interval(AUTOMATION_INTERVAL_ENV))
    return dg.Definitions.merge(*areas, dg.Definitions(sensors=[requests, automation], resources=build_resources(),
                                                       executor=EXECUTOR))


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions()
