"""Run requests for the stages of a request (``core/requests/stages.py``), and the statuses of those stages.

Why here, next to the sensor: a stage is turned into runs and read back from runs in one place, so
the tags that tie a run to its request are written and read by the same code. Each run carries
``envduels/request`` and ``envduels/stage``: the UI's run list filters by request, and a failed run
re-executed from the UI (re-execution keeps the tags) counts for its stage, so the request resumes.
The provider tag is set here only on batches (their solvers share a provider); the instance's run
coordinator sets it on every other run (``envduels_dagster/instance/run_coordinator.py``).

Why pair stages are batched: under the daemon a run costs seconds of launch, imports and event
writes for a pair that plays in about one. A pair stage goes out as ranged runs of many pairs
(``core/requests/batching.py``); the asset plays each pair of its range and records one materialization per
pair, so statuses stay per partition (:func:`run_partitions`).
"""


import dagster as dg
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from envduels_dagster.core.requests.batching import pair_batches, pairs_in_range
from envduels_dagster.core.requests.stages import RequestPlan, Stage, StageStatus, stage_status
from envduels_dagster.instance.run_coordinator import PROVIDER_TAG
from envduels_dagster.settings.variables import int_value

REQUEST_TAG = "envduels/request"
STAGE_TAG = "envduels/stage"
STEPS_DONE_TAG = "envduels/steps_done"  # every step of the run succeeded; only the run's end is to come (stage_end.py)
# Pairs per run for a pair stage (1: one run per pair, as before batching); docs/DECISIONS.md "Batched pair runs".
PAIRS_PER_RUN_ENV = "ENVDUELS_PAIRS_PER_RUN"
PARALLEL_RUNS_ENV = "ENVDUELS_PARALLEL_RUNS"  # a small stage is still cut into this many runs (default 2)
AUTHOR_DIM, SOLVER_DIM = "models", "solvers"  # the pair dimensions' dynamic partitions (partitions.py)


def stage_job_name(stage: Stage) -> str:
    """The job that runs one stage's partitions (one job per partitions definition and round)."""
    if stage.kind == "authors":
        return "author_job" if stage.round == 0 else f"hardened_r{stage.round}_job"
    if stage.kind == "pairs":
        return "pair_job" if stage.round == 0 else f"pairs_r{stage.round}_job"
    return {"downstream": "downstream_job", "learners": "learner_job", "studies": "studies_job"}[stage.kind]


def pairs_per_run() -> int:
    return int_value(PAIRS_PER_RUN_ENV)  # 1..10000 (env_settings.py)


def _pair_key(part: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey(dict(zip(("author", "solver"), part.split("|"))))


def stage_run_requests(plan: RequestPlan, index: int, orders: tuple[list[str], list[str]] | None = None,
                       providers: dict[str, str] | None = None) -> list[dg.RunRequest]:
    """The runs of one stage: one per model partition, ranged batches of pairs (``core/requests/batching.py``).

    ``orders`` are the author and solver dimensions' partitions in the instance's order (a ranged run
    covers the product of the two ranges in that order); without them every pair is its own run.
    ``providers`` maps a solver to its provider, so a batch calls one provider and carries its tag.
    """
    stage = plan.stages[index]
    tags = {REQUEST_TAG: plan.request_id, STAGE_TAG: str(index)}
    job = stage_job_name(stage)
    if not stage.partitions:
        return [dg.RunRequest(run_key=f"{plan.request_id}:{index}", job_name=job,
                              tags={**tags, "dagster/priority": "5"})]
    if stage.kind != "pairs":
        return [dg.RunRequest(run_key=f"{plan.request_id}:{index}:{part}", job_name=job, partition_key=part,
                              tags=tags) for part in stage.partitions]
    size = pairs_per_run() if orders else 1
    authors, solvers = orders or ([], [])
    batches = pair_batches(stage.partitions, authors, solvers, size,
                           int_value(PARALLEL_RUNS_ENV), providers or {})
    out = []
    for b in batches:
        if len(b) == 1:
            out.append(dg.RunRequest(run_key=f"{plan.request_id}:{index}:{b.start}", job_name=job,
                                     partition_key=_pair_key(b.start), tags=tags))
            continue
        ranged = {**tags, ASSET_PARTITION_RANGE_START_TAG: b.start, ASSET_PARTITION_RANGE_END_TAG: b.end,
                  **({PROVIDER_TAG: b.group} if b.group else {})}
        out.append(dg.RunRequest(run_key=f"{plan.request_id}:{index}:{b.start}..{b.end}", job_name=job,
                                 tags=ranged))
    return out


def dimension_orders(instance: dg.DagsterInstance) -> tuple[list[str], list[str]]:
    """The pair dimensions' partitions, in the order Dagster expands a partition range with."""
    return list(instance.get_dynamic_partitions(AUTHOR_DIM)), list(instance.get_dynamic_partitions(SOLVER_DIM))


def run_partitions(instance: dg.DagsterInstance, run: dg.DagsterRun,
                   orders: tuple[list[str], list[str]] | None = None, steps_done_succeeded: bool = False
                   ) -> dict[str, str]:
    """Each partition a run covered, with its outcome (a Dagster run status name).

    A single-partition run reports its status. A ranged run (a batch of pairs) covers the product of
    its range; when it failed, the pairs it materialized before failing count as succeeded (the asset
    records each finished pair, ``assets/duels/assets.py``), the others as failed. ``steps_done_succeeded``:
    a started run whose steps all succeeded (tagged ``envduels/steps_done`` by ``stage_end.py``) counts as
    succeeded (only the run's end is still to come).
    """
    part = run.tags.get("dagster/partition")
    start, end = run.tags.get(ASSET_PARTITION_RANGE_START_TAG), run.tags.get(ASSET_PARTITION_RANGE_END_TAG)
    status = run.status.value
    if steps_done_succeeded and status == "STARTED" and run.tags.get(STEPS_DONE_TAG):
        status = "SUCCESS"
    if part is not None or not (start and end):
        return {part or "": status}
    authors, solvers = orders or dimension_orders(instance)
    covered = pairs_in_range(start, end, authors, solvers) if "|" in start else [start]
    if status != "FAILURE":
        return dict.fromkeys(covered, status)
    done = set()
    for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
        event = entry.dagster_event
        if event is not None and event.partition:
            done.add(str(event.partition))
    return {p: "SUCCESS" if p in done else status for p in covered}


def stage_statuses(instance: dg.DagsterInstance, plan: RequestPlan,
                   steps_done_succeeded: bool = False) -> list[StageStatus]:
    """Each stage's status from the latest run of each of its partitions (a re-execution replaces its parent).

    ``steps_done_succeeded``: count started runs whose steps all succeeded as succeeded (``run_partitions``)."""
    latest: dict[int, dict[str, tuple[float, str]]] = {}
    orders = None
    for rec in instance.get_run_records(dg.RunsFilter(tags={REQUEST_TAG: plan.request_id})):
        run = rec.dagster_run
        stage = int(run.tags.get(STAGE_TAG, -1))
        if orders is None and ASSET_PARTITION_RANGE_START_TAG in run.tags:
            orders = dimension_orders(instance)
        created = rec.create_timestamp.timestamp()
        for part, status in run_partitions(instance, run, orders, steps_done_succeeded).items():
            if created >= latest.setdefault(stage, {}).get(part, (-1.0, ""))[0]:
                latest[stage][part] = (created, status)
    return [stage_status(s.partitions, {p: st for p, (_, st) in latest.get(i, {}).items()},
                         unpartitioned=not s.partitions) for i, s in enumerate(plan.stages)]
