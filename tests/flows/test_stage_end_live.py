"""A request's next stage starts when the previous one ends, not at the sensor's next tick (issue 45).

Through the real daemon (``dagster dev`` with the project's dagster.yaml) on a fresh home: two simulated models
are new, so the request sensor opens one request (authors, pairs, hardening, pairs of round 1, downstream
refresh, ...) and launches its first stage; from then on the run that ends a stage submits the next stage's runs from its success
hook (``assets/registry/stage_end.py``), and the sensor launches what the hook leaves to it (the downstream
refresh). Checked on the request up to its refresh: every run succeeded, no partition of a stage got a second run (the
hooks of the stage's parallel runs and the sensor's ticks all race for it), and every stage after the first
but the refresh was created by the end of the previous stage's last run, within a second of that end -- the
sensor could not be that early, as it sees a stage complete only after its last run ended. The request has one
co-evolution round so that both kinds of stage run are submitted by a hook (a partition per author: the
hardening; ranged batches of pairs), and the test stops at the downstream refresh (dbt, the slow part).
"""

from __future__ import annotations

import collections
import os
import shutil
import time

import pytest

from envduels_dagster.assets.registry.requests import REQUEST_TAG, STAGE_TAG
from envduels_dagster.assets.registry.stage_end import LAUNCHED_BY_TAG
from tests.helpers.daemon import REPO, DagsterDev, live_env, runs_since, wait_for_ticks, write_sim_registry

pytestmark = pytest.mark.slow

RUN_KEY, SENSOR = "dagster/run_key", "dagster/sensor_name"


@pytest.fixture(scope="module")
def request_runs(tmp_path_factory):
    """The request's runs up to its downstream refresh (the sensor's), once two more sensor ticks have passed."""
    import dagster as dg

    home = tmp_path_factory.mktemp("stage_end")
    registry = home / "models.yaml"
    write_sim_registry(registry, ["oracle", "novice"])
    # a small request with both kinds of stage run (a partition each, ranged pair batches) and no dbt: one
    # co-evolution round (authors, pairs, hardening, pairs again), 2 environments, 2 seeds; the test stops once
    # the sensor launched the downstream refresh
    env = live_env(home, registry, ENVDUELS_ROUNDS="1", ENVDUELS_ENVS_PER_AUTHOR="2", ENVDUELS_SEEDS="2")
    (home / "dagster").mkdir()
    shutil.copy(REPO / "dagster.yaml", home / "dagster" / "dagster.yaml")  # the shipped run queue, unchanged
    dev = DagsterDev(env, home / "dagster-dev.log")
    old = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = env["DAGSTER_HOME"]
    try:
        dev.wait_ready()
        with dg.DagsterInstance.get() as instance:
            deadline = time.monotonic() + 600
            while not any(r.job_name == "downstream_job" for r in runs_since(instance, 0)):
                assert time.monotonic() < deadline, "no downstream refresh within 600 s"
                assert not [r for r in runs_since(instance, 0) if r.status == "FAILURE"]
                time.sleep(1)
            wait_for_ticks(instance, "envduels_requests", after=time.time(), n=2)  # a late double would show now
            yield runs_since(instance, 0)
    finally:
        dev.stop()
        if old is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = old


def _stages(runs) -> dict[int, list]:
    out: dict[int, list] = collections.defaultdict(list)
    for r in runs:
        if REQUEST_TAG in r.tags:
            out[int(r.tags[STAGE_TAG])].append(r)
    return dict(sorted(out.items()))


def test_one_request_ran_its_stages_in_order_and_every_run_succeeded(request_runs):
    stages = _stages(request_runs)
    assert len({r.tags[REQUEST_TAG] for r in request_runs if REQUEST_TAG in r.tags}) == 1
    assert [sorted({r.job_name for r in runs}) for runs in stages.values()] == [
        ["author_job"], ["pair_job"], ["hardened_r1_job"], ["pairs_r1_job"], ["downstream_job"]]
    assert [len(runs) for runs in stages.values()] == [2, 2, 2, 2, 1]  # a run per author, pairs in 2 batches
    assert {r.status for r in request_runs if r.job_name != "downstream_job"} == {"SUCCESS"}


def test_no_stage_got_a_run_twice(request_runs):
    keys = collections.Counter(r.tags.get(RUN_KEY) for r in request_runs if REQUEST_TAG in r.tags)
    assert None not in keys and max(keys.values()) == 1, keys
    for index, runs in _stages(request_runs).items():  # and no two runs of a stage cover one partition
        covered = [r.tags.get("dagster/partition") or r.tags.get("dagster/asset_partition_range_start")
                   for r in runs]
        assert len(covered) == len(set(covered)), (index, covered)
    assert all(r.tags.get(SENSOR) == "envduels_requests" for r in request_runs if REQUEST_TAG in r.tags)


def test_each_stage_but_the_refresh_started_at_the_end_of_the_previous_one(request_runs):
    stages = _stages(request_runs)
    by_id = {r.run_id: r for r in request_runs}
    for index in range(1, len(stages)):
        previous, runs = stages[index - 1], stages[index]
        last_end = max(r.ended for r in previous)
        first_created = min(r.created for r in runs)
        if runs[0].job_name == "downstream_job":  # the refresh is the sensor's (it records it in its cursor)
            assert all(LAUNCHED_BY_TAG not in r.tags for r in runs)
            assert first_created > last_end
            continue
        launchers = {r.tags.get(LAUNCHED_BY_TAG) for r in runs}
        assert len(launchers) == 1 and None not in launchers, (index, launchers)  # one run's end launched all
        launcher = by_id[launchers.pop()]
        assert launcher in previous, (index, launcher.job_name)  # a run of the previous stage, at its end
        assert first_created - last_end <= 1.0, (index, first_created - last_end)
