"""``envduels_requests``: the one sensor that turns registry changes and stale data into staged runs.

Why one sensor owns every request (new models, stale partitions, partitions run by hand): the marts,
rankings and training sets must be refreshed once, after *all* partitions of a request landed, and
never while another request is half done. A sensor with a cursor sees every open request; separate
sensors and schedules could not. What a request contains and when a stage may start is decided in
:mod:`envduels_dagster.core.requests.stages`; this module reads run statuses and launches runs.

Per tick: (1) models in the registry but not yet partitions open a request (registered in the same
tick), and so does an import whose environments landed (its pairs with every model as solver); (2) when
no request is open, stale partitions are looked for at most every ENVDUELS_STALE_INTERVAL_S (default
hourly); (3) when no request is open and nothing runs, partitions materialized since the last refresh
(by hand, in the UI) get one downstream refresh; (4) every open
request launches its next stage once the previous one succeeded, or stops at a failed one. Removing a
model from the registry deletes nothing (README).
"""

from __future__ import annotations

import dataclasses
import time

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.registry.partitions import MODELS_PARTITION, SOLVERS_PARTITION, add_requests
from envduels_dagster.assets.registry.requests import dimension_orders, stage_run_requests, stage_statuses
from envduels_dagster.core.authoring.imports import is_import
from envduels_dagster.core.models.registry import Registry, RegistryError, load_registry
from envduels_dagster.core.requests.roster import Roster
from envduels_dagster.core.requests.stages import RequestBook, next_step, plan_newcomers, plan_refresh, plan_stale
from envduels_dagster.core.storage.experiment_file import ExperimentFileError
from envduels_dagster.resources import DuelSettings
from envduels_dagster.settings.experiment import ignored_variables
from envduels_dagster.settings.experiment import stored as stored_settings
from envduels_dagster.settings.locations import registry_file
from envduels_dagster.settings.variables import float_value, sensor_interval, value

PANEL_MODE_ENV = "ENVDUELS_PANEL_MODE"  # frozen (default) | live: see core/requests/stages.py and the README
STALE_INTERVAL_ENV = "ENVDUELS_STALE_INTERVAL_S"  # how often to look for stale partitions (default hourly)
INTERVAL_ENV = "ENVDUELS_SENSOR_INTERVAL_S"  # seconds between ticks (default 5: every daemon loop, docs/DECISIONS.md)
# Assets whose partitions feed the downstream refresh: authoring, hardening and pairs of every round.
PARTITION_ASSET_PREFIXES = ("duel_episodes", "authored_environments", "hardened_environments_r")
ACTIVE = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
          dg.DagsterRunStatus.STARTED]


def _newest_partition_materialization(instance: dg.DagsterInstance) -> float:
    newest = 0.0
    for key in instance.get_asset_keys():
        if key.to_user_string().startswith(PARTITION_ASSET_PREFIXES):
            event = instance.get_latest_materialization_event(key)
            if event is not None:
                newest = max(newest, event.timestamp)
    return newest


def _open_requests(context, book: RequestBook, registry: Registry, roster: Roster, warehouse: DuckDBResource,
                   settings: DuelSettings, rounds: int) -> list:
    """Open a request for newcomers, else (when idle) for stale partitions, else for hand-run partitions.

    A newcomer is a model whose role has no partition yet (``Roster.newcomers``): a new author plays its row
    of pairs, a new learner its column, a model with both roles both (the 2N+1 pairs of before roles)."""
    instance = context.instance
    new = roster.newcomers(instance.get_dynamic_partitions(MODELS_PARTITION),
                           instance.get_dynamic_partitions(SOLVERS_PARTITION))
    stamp = f"{int(time.time())}"
    if new:
        mode = str(value(PANEL_MODE_ENV))
        known = dataclasses.replace(roster, imports=tuple(sorted(book.imports)))  # the imports the book holds
        book.add(plan_newcomers(book.new_id(f"new-{stamp}"), known, new, rounds, mode))
        return add_requests(new)
    _open_import_requests(context, book, roster, stamp)
    if book.open:
        return []
    if time.time() - book.last_stale_check >= float_value(STALE_INTERVAL_ENV):
        from envduels_dagster.core.requests.staleness import stale_partitions

        book.last_stale_check = time.time()
        versions = {m.name: m.version for m in registry.models}
        # the seeds the experiment stored (read now: a later `envduels run` may have changed them since this
        # location loaded); a home without stored settings keeps the resource's
        kept = stored_settings()
        seeds = list(range(kept.seeds)) if kept is not None else list(settings.benchmark_seeds)
        with warehouse.get_connection() as conn:
            authors, pairs = stale_partitions(conn, versions, seeds)
        authors, pairs = roster.still_wanted(authors, pairs)  # a model that lost a role is not re-run in it
        plan = plan_stale(book.new_id(f"stale-{stamp}"), authors, pairs, roster.solvers, rounds)
        if plan:
            book.add(plan)
            return []
    newest = _newest_partition_materialization(context.instance)
    if not book.refreshed_through:
        book.refreshed_through = newest  # first tick on an existing instance: what is there counts as refreshed
    elif newest > book.refreshed_through and not context.instance.get_run_records(
            dg.RunsFilter(statuses=ACTIVE), limit=1):
        book.add(plan_refresh(book.new_id(f"refresh-{stamp}"), roster.solvers, "partitions ran outside a request"))
    return []


def _open_import_requests(context, book: RequestBook, roster: Roster, stamp: str) -> None:
    """Every import (partition ``import:<name>``, ``envduels import``) whose environments landed since it was
    last planned: every registry model with the solver role plays it (``plan_import``), then one refresh."""
    from envduels_dagster.core.requests.stages import plan_import

    imports = {p for p in context.instance.get_dynamic_partitions(MODELS_PARTITION) if is_import(p)}
    if not imports:
        return
    landed = context.instance.get_latest_storage_id_by_partition(
        dg.AssetKey("authored_environments"), dg.DagsterEventType.ASSET_MATERIALIZATION, imports)
    for partition, storage_id in sorted(landed.items()):
        if storage_id > book.imports.get(partition, -1):
            book.imports[partition] = storage_id
            book.add(plan_import(book.new_id(f"import-{stamp}"), partition, roster.solvers))


def _advance(context, book: RequestBook, registry: Registry | None = None,
             notes: list[str] | None = None) -> list[dg.RunRequest]:
    """Launch the next stage of every open request whose previous stage succeeded (pairs in batches).

    ``notes`` receives one line per request that launches nothing this tick (the request id and the stage it
    waits for, or the stage that failed): the tick's skip reason, shown in the UI's tick list."""
    notes = notes if notes is not None else []
    runs: list[dg.RunRequest] = []
    providers = {m.name: m.provider for m in registry.models} if registry is not None else {}
    plans = book.plans()
    decisions = [next_step(plan, stage_statuses(context.instance, plan)) for plan in plans]
    for i, (plan, decision) in enumerate(zip(plans, decisions)):
        context.log.info(f"{plan.request_id}: {decision.message}")
        if decision.action in ("wait", "failed"):
            notes.append(f"{plan.request_id}: {decision.message}")
        if decision.action == "done":
            book.finish(plan.request_id)
        elif decision.action == "launch":
            stage = plan.stages[decision.stage]
            if stage.kind == "downstream":
                # refresh only on whole data: no earlier request may still have partitions to land
                if any(d.stage is not None and p.stages[d.stage].kind in ("authors", "pairs")
                       for p, d in zip(plans[:i], decisions[:i])):
                    context.log.info(f"{plan.request_id}: the refresh waits for an earlier request's partitions")
                    notes.append(f"{plan.request_id}: stage {decision.stage + 1}/{len(plan.stages)} ({stage.label}) "
                                 "waits for an earlier request's partitions")
                    continue
                book.refreshed_through = time.time()
            runs += stage_run_requests(plan, decision.stage, dimension_orders(context.instance), providers)
    return runs


def skip_reason(open_requests: int, notes: list[str]) -> str:
    """The tick list's line when nothing is launched: which request waits for which stage (or failed where)."""
    if not open_requests:
        return "; ".join(["no open request; nothing to launch this tick", *notes])
    return f"{open_requests} open request(s), nothing to launch this tick: " + "; ".join(notes or ["(no stage due)"])


def build_requests_sensor(rounds: int, jobs: list) -> dg.SensorDefinition:
    """The sensor over ``jobs`` (every stage's job: authors and pairs of each round, downstream, learners, studies)."""

    @dg.sensor(name="envduels_requests", jobs=jobs, minimum_interval_seconds=sensor_interval(INTERVAL_ENV),
               default_status=dg.DefaultSensorStatus.RUNNING,
               description="Runs what registry changes ask for, in stages: a new model gets every round, then one "
                           "refresh of marts, rankings and training sets; stale partitions likewise (hourly check); "
                           "partitions run by hand get one refresh once nothing is running.")
    def envduels_requests(context: dg.SensorEvaluationContext, warehouse: DuckDBResource, settings: DuelSettings):
        book = RequestBook.from_json(context.cursor)
        try:
            registry = load_registry(registry_file())  # ENVDUELS_REGISTRY, else the experiment's stored one
            imports = [p for p in context.instance.get_dynamic_partitions(MODELS_PARTITION) if is_import(p)]
            roster = Roster.from_registry(registry, imports)  # refuses a registry with no author or no solver
            ignored = ignored_variables()
        except RegistryError as exc:
            return dg.SkipReason(f"registry is invalid, nothing requested: {exc}")
        except ExperimentFileError as exc:
            return dg.SkipReason(f"nothing requested: {exc}")
        partition_requests = _open_requests(context, book, registry, roster, warehouse, settings, rounds)
        notes: list[str] = []
        if ignored:  # visible, not applied: a size change goes through `envduels run`, which plans it first
            line = ("not applied (the experiment's stored settings size its runs; change them with envduels run, "
                    "which plans the change first): " + ", ".join(ignored))
            context.log.warning(line)
            notes.append(line)
        runs = _advance(context, book, registry, notes)
        if not runs:  # the tick says why no run (issue 43: "0 runs requested" after registering partitions)
            return dg.SensorResult(dynamic_partitions_requests=partition_requests, cursor=book.to_json(),
                                   skip_reason=dg.SkipReason(skip_reason(len(book.open), notes)))
        return dg.SensorResult(run_requests=runs, dynamic_partitions_requests=partition_requests,
                               cursor=book.to_json())

    return envduels_requests
