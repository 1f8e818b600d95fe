"""The next stage of a request launched by the end of the previous one (issue 45), the sensor as the fallback.

Why: the request sensor (``sensors.py``) launches a stage only at a tick after the previous stage's last run
ended, and Dagster's sensor daemon loops every 5 s (``MIN_INTERVAL_LOOP_TIME``, hard-coded; run-status sensors
tick on the same loop), so every stage of a request waited 0-5 s, more under load, for nothing. Here the run
that ends a stage submits the next stage's runs itself: a success hook on every stage job
(:data:`STAGE_HOOKS`) runs after each step; after the run's last step it

1. marks its run (``envduels/steps_done``): its steps all succeeded, only the run's own end is still to come;
2. reads the request's plan from the sensor's cursor (read-only: only the sensor writes its cursor) and the
   stage statuses exactly as the sensor does, counting the marked runs as succeeded;
3. when that makes the stage complete and the next stage due, builds the next stage's runs with the sensor's
   own code (``requests.stage_run_requests``: the same partitions, batches, tags and run keys) and submits them
   to the run queue, which the coordinator dequeues within a second.

Never twice: two runs that end a stage at the same time both mark, then both read, so at least one of them
sees the stage complete (both may). Each new run's id is derived from its run key (:func:`run_id_for`) and a
run id can be created once only (the run storage's primary key, in SQLite and in Postgres), so a second hook
creates nothing. The sensor cannot race them: it sees the stage complete only once the last run has ended,
which is after its hook returned, and the hook's runs carry the sensor's name and run key
(``dagster/sensor_name``, ``dagster/run_key``), so Dagster's own run-key check skips them if the sensor asks
for them again (``envduels/launched_by`` names the run whose end launched them). What the hook does not do, the
sensor does at its next tick as before: the downstream refresh (the sensor's cursor records it), a stage whose
run did not succeed, a stage another request must wait for, or any error here (logged, never failing the run).
``ENVDUELS_STAGE_LAUNCH=sensor`` turns the hook off.
"""

from __future__ import annotations

import uuid

import dagster as dg
from dagster._core.errors import DagsterRunAlreadyExists
from dagster._core.storage.tags import RUN_KEY_TAG, SENSOR_NAME_TAG

from envduels_dagster.assets.registry.requests import (
    REQUEST_TAG,
    STAGE_TAG,
    STEPS_DONE_TAG,
    dimension_orders,
    stage_run_requests,
    stage_statuses,
)
from envduels_dagster.core.requests.stages import RequestBook, RequestPlan, next_step
from envduels_dagster.settings.variables import value

SENSOR_NAME = "envduels_requests"
STAGE_LAUNCH_ENV = "ENVDUELS_STAGE_LAUNCH"  # on-end (default) | sensor
LAUNCHED_BY_TAG = "envduels/launched_by"  # the run whose end submitted this one (absent: the sensor did)
_ENDED_STEPS = {dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_SKIPPED}


def run_id_for(sensor_origin_id: str, run_key: str) -> str:
    """The run id of the run with ``run_key`` that a stage's end creates: the same in every process."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"envduels/{sensor_origin_id}/{run_key}"))


def _last_step(instance: dg.DagsterInstance, run: dg.DagsterRun, step_key: str) -> bool:
    """Whether every step of ``run`` but ``step_key`` (which just succeeded) has succeeded or was skipped."""
    snap = instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id) \
        if run.execution_plan_snapshot_id else None
    if snap is None:
        return False
    steps = set(snap.step_keys_to_execute or [s.key for s in snap.steps]) - {step_key}
    if not steps:
        return True
    ended = {r.event_log_entry.step_key for r in instance.get_records_for_run(run.run_id, of_type=_ENDED_STEPS,
                                                                              limit=10000).records}
    return steps <= ended


def _sensor_state(instance: dg.DagsterInstance, run: dg.DagsterRun):
    """The request sensor's stored state in the code location ``run`` came from (None: none found)."""
    from dagster._core.scheduler.instigation import InstigatorType

    origin = run.remote_job_origin
    if origin is None:
        return None
    selector = origin.repository_origin.get_selector()
    for state in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR):
        if state.name == SENSOR_NAME and state.origin.repository_origin.get_selector() == selector:
            return state
    return None


def _plan(state, request_id: str) -> RequestPlan | None:
    cursor = getattr(state.instigator_data, "cursor", None) if state is not None else None
    text = RequestBook.from_json(cursor).open.get(request_id)
    return RequestPlan.from_json(text) if text else None


def launch_after(instance: dg.DagsterInstance, run: dg.DagsterRun, log=None) -> list[str]:
    """Mark ``run`` as having finished its steps; if that completes its stage, submit the next stage's runs.

    Returns the ids of the runs this call created (empty: nothing due, or another process created them)."""
    instance.add_run_tags(run.run_id, {STEPS_DONE_TAG: "1"})
    state = _sensor_state(instance, run)
    plan = _plan(state, run.tags[REQUEST_TAG])
    if plan is None:
        return []
    decision = next_step(plan, stage_statuses(instance, plan, steps_done_succeeded=True))
    if decision.action != "launch" or decision.stage != int(run.tags.get(STAGE_TAG, -2)) + 1:
        return []  # not complete yet, done, failed, or not this run's next stage: the sensor decides
    if plan.stages[decision.stage].kind == "downstream":
        return []  # the refresh waits for other requests and is recorded in the sensor's cursor: the sensor's
    from envduels_dagster.core.models.registry import load_registry
    from envduels_dagster.settings.locations import registry_file

    providers = {m.name: m.provider for m in load_registry(registry_file()).models}
    requests = stage_run_requests(plan, decision.stage, dimension_orders(instance), providers)
    created = _submit(instance, run, state.instigator_origin_id, requests)
    if log is not None:
        log.info(f"{plan.request_id}: stage {decision.stage + 1}/{len(plan.stages)} "
                 f"({plan.stages[decision.stage].label}) submitted at the end of this run: {len(created)} of "
                 f"{len(requests)} run(s) created here")
    return created


def _submit(instance: dg.DagsterInstance, run: dg.DagsterRun, origin_id: str,
            requests: list[dg.RunRequest]) -> list[str]:
    from dagster._core.origin import JobPythonOrigin
    from dagster._core.remote_origin import RemoteJobOrigin
    from dagster._utils.hosted_user_process import recon_repository_from_origin

    remote, code = run.remote_job_origin, run.job_code_origin
    assert remote is not None and code is not None  # daemon-launched runs have both (_sensor_state checked)
    # the run's own code location, already loaded in this process (the definitions are built once per process)
    repo = recon_repository_from_origin(code.repository_origin).get_definition()
    created: list[str] = []
    for request in requests:
        key = request.run_key or ""
        if instance.get_runs(dg.RunsFilter(tags={RUN_KEY_TAG: key, SENSOR_NAME_TAG: SENSOR_NAME}), limit=1):
            continue  # already launched (by another run's end, or by the sensor)
        job = repo.get_job(request.job_name or "")
        if request.partition_key is not None:
            request = request.with_resolved_tags_and_config(job, [], instance)
        tags = {**job.run_tags, **request.tags, SENSOR_NAME_TAG: SENSOR_NAME, RUN_KEY_TAG: key,
                LAUNCHED_BY_TAG: run.run_id}
        try:
            new = instance.create_run_for_job(
                job, run_id=run_id_for(origin_id, key), run_config=request.run_config, tags=tags,
                status=dg.DagsterRunStatus.NOT_STARTED,
                remote_job_origin=RemoteJobOrigin(repository_origin=remote.repository_origin, job_name=job.name),
                job_code_origin=JobPythonOrigin(job.name, code.repository_origin))
        except DagsterRunAlreadyExists:
            continue  # another run that ended the stage created it first
        instance.submit_run(new.run_id, None)  # type: ignore[arg-type]  # the queued coordinator needs none
        created.append(new.run_id)
    return created


@dg.success_hook(name="envduels_next_stage")
def launch_next_stage(context: dg.HookContext) -> None:
    """After a stage run's last step: submit the next stage if this run completed its stage (module doc)."""
    instance = context.instance
    run = instance.get_run_by_id(context.run_id)
    if run is None or REQUEST_TAG not in run.tags or value(STAGE_LAUNCH_ENV) != "on-end":
        return
    from dagster._core.run_coordinator.queued_run_coordinator import QueuedRunCoordinator

    if not isinstance(instance.run_coordinator, QueuedRunCoordinator) or run.remote_job_origin is None:
        return  # only runs the daemon launched from the queue; anything else is left to the sensor
    try:
        if _last_step(instance, run, context.step_key):
            launch_after(instance, run, context.log)
    except Exception as exc:  # noqa: BLE001  # never fail a run that succeeded: the sensor launches the stage
        context.log.warning(f"the next stage was not submitted at this run's end ({type(exc).__name__}: {exc}); "
                            f"the request sensor launches it at its next tick")


STAGE_HOOKS = {launch_next_stage}
