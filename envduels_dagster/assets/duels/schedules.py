"""Stale-partition schedules: re-run only partitions whose inputs changed.

A partition is stale when a model's ``version`` in the registry differs from the
version its rows were made with, or the configured benchmark seeds changed
(``core.staleness``). Two schedules share one cron (ENVDUELS_STALE_CRON, default
hourly, read when the definitions are built) because a job may not mix partitions
definitions: one re-authors stale authors, one replays stale pairs (those pair runs
wait for the re-authored environments). Both live here, next to the pair job, since
they share everything but the job they launch.
"""

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.authoring.jobs import author_job
from envduels_dagster.assets.duels.jobs import pair_job
from envduels_dagster.assets.registry.requests import author_request, pair_request
from envduels_dagster.core.registry import RegistryError, load_registry
from envduels_dagster.resources import DuelSettings

DEFAULT_STALE_CRON = "0 * * * *"


def stale_requests(context, warehouse: DuckDBResource, settings: DuelSettings, kind: str):
    """Run requests for the stale ``kind`` ("author" or "pair") partitions, or a SkipReason saying why none."""
    from envduels_dagster.core.staleness import stale_partitions

    try:
        registry = load_registry()
    except RegistryError as exc:
        return dg.SkipReason(f"registry is invalid, nothing requested: {exc}")
    versions = {m.name: m.version for m in registry.models}
    providers = {m.name: m.provider for m in registry.models}
    with warehouse.get_connection() as conn:
        stale_authors, stale_pairs = stale_partitions(conn, versions, list(settings.benchmark_seeds))
    tick = f"stale[{','.join(map(str, settings.benchmark_seeds))}]"
    if kind == "author":
        runs = [author_request(a, versions[a], providers[a], tick) for a in stale_authors]
    else:
        runs = [pair_request(a, s, versions, providers[s], tick) for a, s in stale_pairs]
    if not runs:
        return dg.SkipReason(f"no stale {kind} partitions")
    context.log.info(f"{len(runs)} stale {kind} partitions")
    return runs


def stale_schedules(cron: str = DEFAULT_STALE_CRON) -> list[dg.ScheduleDefinition]:
    """``stale_authors_schedule`` and ``stale_pairs_schedule`` on ``cron``."""

    @dg.schedule(cron_schedule=cron, job=author_job, name="stale_authors_schedule",
                 default_status=dg.DefaultScheduleStatus.RUNNING,
                 description="Re-author models whose registry version or benchmark seeds changed.")
    def stale_authors_schedule(context: dg.ScheduleEvaluationContext, warehouse: DuckDBResource,
                               settings: DuelSettings):
        return stale_requests(context, warehouse, settings, "author")

    @dg.schedule(cron_schedule=cron, job=pair_job, name="stale_pairs_schedule",
                 default_status=dg.DefaultScheduleStatus.RUNNING,
                 description="Replay pairs whose author or solver version (or seeds) changed.")
    def stale_pairs_schedule(context: dg.ScheduleEvaluationContext, warehouse: DuckDBResource,
                             settings: DuelSettings):
        return stale_requests(context, warehouse, settings, "pair")

    return [stale_authors_schedule, stale_pairs_schedule]
