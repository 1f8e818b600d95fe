"""Stale-partition schedules: re-run only partitions whose inputs changed.

A partition is stale when a model's ``version`` in the registry differs from the
version its rows were made with, or the configured benchmark seeds changed. Two
schedules share one cron (ENVDUELS_STALE_CRON, default hourly) because a job may
not mix partitions definitions: one re-authors stale authors, one replays stale pairs
(those pair runs wait for the re-authored environments).
"""

import os

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.core.registry import RegistryError, load_registry
from envduels_dagster.core.staleness import stale_plan
from envduels_dagster.core.warehouse import ensure_schema
from envduels_dagster.jobs import author_job, pair_job
from envduels_dagster.resources import DuelSettings
from envduels_dagster.sensors import author_request, pair_request

STALE_CRON = os.environ.get("ENVDUELS_STALE_CRON", "0 * * * *")


def find_stale(warehouse: DuckDBResource, settings: DuelSettings):
    """(registry, stale authors, stale pairs) from the warehouse's recorded versions and seeds."""
    registry = load_registry()
    versions = {m.name: m.version for m in registry.models}
    with warehouse.get_connection() as conn:
        ensure_schema(conn)
        authors = conn.execute("""SELECT author, list(DISTINCT author_version), list(DISTINCT benchmark_seeds)
                                  FROM environments WHERE round = 0 GROUP BY author""").fetchall()
        pairs = conn.execute("""SELECT p.author, p.solver, list(DISTINCT e.author_version),
                                       list(DISTINCT p.solver_version)
                                FROM episodes p JOIN environments e USING (env_id) GROUP BY ALL""").fetchall()
    author_state = {a: (set(v), {tuple(s) for s in seeds}) for a, v, seeds in authors}
    pair_state = {(a, s): (set(av), set(sv)) for a, s, av, sv in pairs}
    stale_authors, stale_pairs = stale_plan(versions, list(settings.benchmark_seeds), author_state, pair_state)
    return registry, stale_authors, stale_pairs


def _requests(context, warehouse, settings, kind: str):
    try:
        registry, stale_authors, stale_pairs = find_stale(warehouse, settings)
    except RegistryError as exc:
        return dg.SkipReason(f"registry is invalid, nothing requested: {exc}")
    versions = {m.name: m.version for m in registry.models}
    providers = {m.name: m.provider for m in registry.models}
    seeds = ",".join(map(str, settings.benchmark_seeds))
    tick = f"stale[{seeds}]"
    if kind == "author":
        runs = [author_request(a, versions[a], providers[a], tick) for a in stale_authors]
    else:
        runs = [pair_request(a, s, versions, providers[s], tick) for a, s in stale_pairs]
    if not runs:
        return dg.SkipReason(f"no stale {kind} partitions")
    context.log.info(f"{len(runs)} stale {kind} partitions")
    return runs


@dg.schedule(cron_schedule=STALE_CRON, job=author_job, name="stale_authors_schedule",
             default_status=dg.DefaultScheduleStatus.RUNNING,
             description="Re-author models whose registry version or benchmark seeds changed.")
def stale_authors_schedule(context: dg.ScheduleEvaluationContext, warehouse: DuckDBResource, settings: DuelSettings):
    return _requests(context, warehouse, settings, "author")


@dg.schedule(cron_schedule=STALE_CRON, job=pair_job, name="stale_pairs_schedule",
             default_status=dg.DefaultScheduleStatus.RUNNING,
             description="Replay pairs whose author or solver version (or seeds) changed.")
def stale_pairs_schedule(context: dg.ScheduleEvaluationContext, warehouse: DuckDBResource, settings: DuelSettings):
    return _requests(context, warehouse, settings, "pair")
