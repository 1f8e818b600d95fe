"""The stage statuses the stage-end hook reads (``assets/registry/stage_end.py``): a run that finished its steps.

The hook of the run that ends a stage runs while its run, and maybe another run of the stage ending at the same
time, is still STARTED. Each such run is tagged ``envduels/steps_done`` before the statuses are read, and only the
hook counts a tagged STARTED run as succeeded; the sensor (the default) must keep waiting for the run's real end.
The full flow through the daemon is checked in ``tests/flows/test_live_flows.py`` (its stage tests).
"""

from __future__ import annotations

import uuid

import dagster as dg
import pytest

from envduels_dagster.assets.registry.requests import REQUEST_TAG, STAGE_TAG, STEPS_DONE_TAG, stage_statuses
from envduels_dagster.core.requests.stages import RequestPlan, Stage, StageStatus, next_step

AUTHORS = ("oracle", "novice")
PLAN = RequestPlan("req-1", "test", (Stage("authors", 0, AUTHORS), Stage("pairs", 0, ("oracle|novice",))))


@pytest.fixture
def instance():
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


def _run(instance, author: str, status: dg.DagsterRunStatus, done: bool = False) -> str:
    tags = {REQUEST_TAG: PLAN.request_id, STAGE_TAG: "0", "dagster/partition": author,
            **({STEPS_DONE_TAG: "1"} if done else {})}
    run = instance.add_run(dg.DagsterRun(job_name="author_job", run_id=str(uuid.uuid4()), tags=tags,
                                         status=status))
    return run.run_id


def test_a_started_run_counts_as_succeeded_only_for_the_hook_and_only_once_tagged(instance):
    _run(instance, "oracle", dg.DagsterRunStatus.SUCCESS)
    ending = _run(instance, "novice", dg.DagsterRunStatus.STARTED)
    assert stage_statuses(instance, PLAN)[0] is StageStatus.RUNNING
    assert stage_statuses(instance, PLAN, steps_done_succeeded=True)[0] is StageStatus.RUNNING  # not tagged yet
    instance.add_run_tags(ending, {STEPS_DONE_TAG: "1"})
    assert stage_statuses(instance, PLAN)[0] is StageStatus.RUNNING  # the sensor still waits for the run's end
    hook = stage_statuses(instance, PLAN, steps_done_succeeded=True)
    assert hook == [StageStatus.SUCCEEDED, StageStatus.NOT_LAUNCHED]
    assert (next_step(PLAN, hook).action, next_step(PLAN, hook).stage) == ("launch", 1)


def test_two_runs_ending_together_each_see_the_other_once_both_are_tagged(instance):
    first = _run(instance, "oracle", dg.DagsterRunStatus.STARTED)
    second = _run(instance, "novice", dg.DagsterRunStatus.STARTED)
    instance.add_run_tags(first, {STEPS_DONE_TAG: "1"})  # the first hook tags its run and reads: not complete
    assert stage_statuses(instance, PLAN, steps_done_succeeded=True)[0] is StageStatus.RUNNING
    instance.add_run_tags(second, {STEPS_DONE_TAG: "1"})  # the second tags, then reads: complete
    assert stage_statuses(instance, PLAN, steps_done_succeeded=True)[0] is StageStatus.SUCCEEDED


def test_a_tagged_run_that_then_failed_is_a_failure(instance):
    _run(instance, "oracle", dg.DagsterRunStatus.SUCCESS)
    _run(instance, "novice", dg.DagsterRunStatus.FAILURE, done=True)
    assert stage_statuses(instance, PLAN, steps_done_succeeded=True)[0] is StageStatus.FAILED
