"""Run requests for the stages of a request (``core/requests.py``), and the statuses of those stages.

Why here, next to the sensor: a stage is turned into runs and read back from runs in one place, so
the tags that tie a run to its request are written and read by the same code. Each run carries
``envduels/request`` and ``envduels/stage``: the UI's run list filters by request, and a failed run
re-executed from the UI (re-execution keeps the tags) counts for its stage, so the request resumes.
The provider tag is not set here: the instance's run coordinator sets it on every run
(``envduels_dagster/run_coordinator.py``).
"""

import dagster as dg

from envduels_dagster.core.requests import RequestPlan, Stage, StageStatus, stage_status

REQUEST_TAG = "envduels/request"
STAGE_TAG = "envduels/stage"


def stage_job_name(stage: Stage) -> str:
    """The job that runs one stage's partitions (one job per partitions definition and round)."""
    if stage.kind == "authors":
        return "author_job" if stage.round == 0 else f"hardened_r{stage.round}_job"
    if stage.kind == "pairs":
        return "pair_job" if stage.round == 0 else f"pairs_r{stage.round}_job"
    return {"downstream": "downstream_job", "learners": "learner_job", "studies": "studies_job"}[stage.kind]


def stage_run_requests(plan: RequestPlan, index: int) -> list[dg.RunRequest]:
    stage = plan.stages[index]
    tags = {REQUEST_TAG: plan.request_id, STAGE_TAG: str(index)}
    job = stage_job_name(stage)
    if not stage.partitions:
        return [dg.RunRequest(run_key=f"{plan.request_id}:{index}", job_name=job,
                              tags={**tags, "dagster/priority": "5"})]
    out = []
    for part in stage.partitions:
        key = dg.MultiPartitionKey(dict(zip(("author", "solver"), part.split("|")))) if "|" in part else part
        out.append(dg.RunRequest(run_key=f"{plan.request_id}:{index}:{part}", job_name=job, partition_key=key,
                                 tags=tags))
    return out


def stage_statuses(instance: dg.DagsterInstance, plan: RequestPlan) -> list[StageStatus]:
    """Each stage's status from the latest run of each of its partitions (a re-execution replaces its parent)."""
    latest: dict[int, dict[str, tuple[float, str]]] = {}
    for rec in instance.get_run_records(dg.RunsFilter(tags={REQUEST_TAG: plan.request_id})):
        run = rec.dagster_run
        stage = int(run.tags.get(STAGE_TAG, -1))
        part = run.tags.get("dagster/partition", "")
        created = rec.create_timestamp.timestamp()
        if created >= latest.setdefault(stage, {}).get(part, (-1.0, ""))[0]:
            latest[stage][part] = (created, run.status.value)
    return [stage_status(s.partitions, {p: st for p, (_, st) in latest.get(i, {}).items()},
                         unpartitioned=not s.partitions) for i, s in enumerate(plan.stages)]
