"""Adding a model runs only its partitions; version bumps mark only that model stale; killed runs resume."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import dagster as dg
import duckdb
import pytest

from envduels_dagster.assets.registry.partitions import MODELS_PARTITION, SOLVERS_PARTITION
from envduels_dagster.assets.registry.requests import REQUEST_TAG, STAGE_TAG
from envduels_dagster.cli.demo import materialize_all
from envduels_dagster.core.requests.stages import RequestBook
from envduels_dagster.core.requests.staleness import new_model_plan, stale_plan
from tests.helpers.pipeline import pipeline_resources, write_registry
from tests.helpers.sensor_ticks import (  # noqa: F401 - quiet_resources is a fixture
    finish,
    keys_of,
    quiet_resources,
    tick,
)


def test_a_new_model_is_run_stage_by_stage_and_refreshed_once(tmp_path, monkeypatch, quiet_resources):
    registry = write_registry(tmp_path / "models.yaml", ["oracle", "expert", "novice"])
    monkeypatch.setenv("ENVDUELS_REGISTRY", str(registry))
    instance = dg.DagsterInstance.ephemeral()

    runs, cursor, _ = tick(instance, resources=quiet_resources)  # all three are new: one request
    assert keys_of(runs, "author_job") == ["expert", "novice", "oracle"] and keys_of(runs, "pair_job") == []
    assert sorted(instance.get_dynamic_partitions(MODELS_PARTITION)) == ["expert", "novice", "oracle"]
    assert sorted(instance.get_dynamic_partitions(SOLVERS_PARTITION)) == ["expert", "novice", "oracle"]
    request = runs[0].tags[REQUEST_TAG]
    assert all(r.tags[REQUEST_TAG] == request and r.tags[STAGE_TAG] == "0" for r in runs)

    # Not launched yet (no daemon here): the same run keys again, which the daemon dedups; no pair yet.
    again, cursor, _ = tick(instance, cursor, quiet_resources)
    assert {r.run_key for r in again} == {r.run_key for r in runs}
    finish(instance, runs)
    pairs, cursor, _ = tick(instance, cursor, quiet_resources)
    assert len(keys_of(pairs, "pair_job", instance)) == 9 and {r.tags[STAGE_TAG] for r in pairs} == {"1"}
    assert len(set(keys_of(pairs, "pair_job", instance))) == 9  # every pair once, in batches
    assert len({r.run_key for r in pairs}) == len(pairs) == 3  # 9 pairs, at least 2 runs: 3 author rows
    seen = {"pair_job": 3}
    for _ in range(8):  # round 1 hardening, round 1 pairs, downstream, learners, studies
        finish(instance, pairs)
        pairs, cursor, _ = tick(instance, cursor, quiet_resources)
        if not pairs:
            break
        for r in pairs:
            seen[r.job_name] = seen.get(r.job_name, 0) + 1
    assert seen == {"pair_job": 3, "hardened_r1_job": 3, "pairs_r1_job": 3, "downstream_job": 1,
                    "learner_job": 3, "studies_job": 1}
    assert RequestBook.from_json(cursor).open == {}

    write_registry(registry, ["oracle", "expert", "novice", "apprentice"])
    runs, cursor, _ = tick(instance, cursor, quiet_resources)
    assert keys_of(runs, "author_job") == ["apprentice"]
    finish(instance, runs)
    pairs, cursor, _ = tick(instance, cursor, quiet_resources)
    new_pairs = keys_of(pairs, "pair_job", instance)
    assert len(new_pairs) == 2 * 3 + 1 and all("apprentice" in p for p in new_pairs)
    assert len(pairs) == 2  # the newcomer's column and its row


def test_a_failed_stage_stops_its_request_and_a_successful_rerun_resumes_it(tmp_path, monkeypatch, quiet_resources):
    registry = write_registry(tmp_path / "models.yaml", ["oracle", "novice"])
    monkeypatch.setenv("ENVDUELS_REGISTRY", str(registry))
    instance = dg.DagsterInstance.ephemeral()
    authors, cursor, _ = tick(instance, resources=quiet_resources)
    finish(instance, authors[:1])
    finish(instance, authors[1:], dg.DagsterRunStatus.FAILURE)
    runs, cursor, skip = tick(instance, cursor, quiet_resources)
    assert runs == [] and "1 open request" in skip.skip_message  # nothing downstream of the failure
    request = authors[0].tags[REQUEST_TAG]
    assert f"{request}: " in skip.skip_message and "stage 1/" in skip.skip_message and "failed" in skip.skip_message
    finish(instance, authors[1:])  # a re-execution from the UI keeps the tags
    runs, cursor, _ = tick(instance, cursor, quiet_resources)
    assert len(keys_of(runs, "pair_job", instance)) == 4


def test_while_a_stage_runs_the_skip_reason_names_the_request_and_the_stage_it_waits_for(tmp_path, monkeypatch,
                                                                                          quiet_resources):
    registry = write_registry(tmp_path / "models.yaml", ["oracle", "novice"])
    monkeypatch.setenv("ENVDUELS_REGISTRY", str(registry))
    instance = dg.DagsterInstance.ephemeral()
    authors, cursor, _ = tick(instance, resources=quiet_resources)
    finish(instance, authors, dg.DagsterRunStatus.STARTED)  # launched by the daemon, still running
    runs, cursor, skip = tick(instance, cursor, quiet_resources)
    request = authors[0].tags[REQUEST_TAG]
    assert runs == [] and skip.skip_message.startswith("1 open request(s), nothing to launch this tick: ")
    assert f"{request}: " in skip.skip_message and "waiting for stage 1/" in skip.skip_message
    assert "(authors round 0 (2 partitions))" in skip.skip_message


def test_sensor_skips_with_reason_on_malformed_registry(tmp_path, monkeypatch, quiet_resources):
    bad = tmp_path / "models.yaml"
    bad.write_text("models:\n  - name: a\n")
    monkeypatch.setenv("ENVDUELS_REGISTRY", str(bad))
    instance = dg.DagsterInstance.ephemeral()
    runs, _, skip = tick(instance, resources=quiet_resources)
    assert runs == [] and "field 'model'" in skip.skip_message
    assert instance.get_dynamic_partitions(MODELS_PARTITION) == []


def test_new_model_plan_counts():
    new, pairs = new_model_plan(["a", "b", "c", "d"], ["a", "b", "c"])
    assert new == ["d"] and len(pairs) == 7 and ("d", "d") in pairs


def test_stale_plan_marks_only_the_bumped_model():
    versions = {"a": "1", "b": "2", "c": "1"}
    authors = {m: ({"1"}, {(0, 1)}) for m in "abc"}
    pairs = {(x, y): ({"1"}, {"1"}) for x in "abc" for y in "abc"}
    stale_authors, stale_pairs = stale_plan(versions, [0, 1], authors, pairs)
    assert stale_authors == ["b"]
    assert stale_pairs == sorted(p for p in pairs if "b" in p)
    # New seeds make every author (and so every pair) stale; removed models are left alone.
    stale_authors, stale_pairs = stale_plan({"a": "1"}, [0, 1, 2], authors, pairs)
    assert stale_authors == ["a"] and stale_pairs == [("a", "a")]


@pytest.mark.slow
def test_a_version_bump_on_a_real_warehouse_opens_one_stale_request(tmp_path, monkeypatch):
    registry = write_registry(tmp_path / "models.yaml", ["expert", "novice"])
    monkeypatch.setenv("ENVDUELS_REGISTRY", str(registry))
    monkeypatch.setenv("ENVDUELS_STALE_INTERVAL_S", "0")
    resources = pipeline_resources(tmp_path, registry, envs_per_author=1, seeds=(0, 1))
    instance = dg.DagsterInstance.ephemeral()
    materialize_all(instance, resources, log=lambda _m: None, learners=False)  # staleness is of authors and pairs
    sensor_resources = {k: resources[k] for k in ("warehouse", "settings")}

    runs, cursor, skip = tick(instance, resources=sensor_resources)
    assert runs == [] and "no open request" in skip.skip_message  # nothing new, nothing stale
    registry.write_text(registry.read_text().replace("model: envduels-sim/novice",
                                                     "model: envduels-sim/novice\n    version: '2'"))
    runs, cursor, _ = tick(instance, cursor, sensor_resources)
    assert keys_of(runs, "author_job") == ["novice"]
    finish(instance, runs)
    pairs, cursor, _ = tick(instance, cursor, sensor_resources)
    assert keys_of(pairs, "pair_job", instance) == ["expert|novice", "novice|expert", "novice|novice"]


RESUME_SCRIPT = textwrap.dedent("""
    import sys
    import dagster as dg
    from tests.helpers.pipeline import pipeline_resources
    from pathlib import Path
    from envduels_dagster.assets.authoring.assets import authored_environments
    from envduels_dagster.assets.duels.assets import duel_episodes
    from envduels_dagster.assets.registry.partitions import register_models, pair_key
    from envduels_dagster.resources import GatewayResource
    tmp, registry, latency, phase = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    res = pipeline_resources(tmp, registry, envs_per_author=2, seeds=(0, 1, 2))
    res["gateway"] = GatewayResource(registry_path=str(registry), cache_path=str(tmp / "cache" / "calls.sqlite"),
                                     simulated_latency_ms=latency)
    instance = dg.DagsterInstance.ephemeral()
    register_models(instance, ["apprentice", "journeyman"])
    if phase == "author":
        dg.materialize([authored_environments], instance=instance, resources=res, partition_key="apprentice")
    else:
        r = dg.materialize([duel_episodes], instance=instance, resources=res,
                           partition_key=pair_key("apprentice", "journeyman"))
        md = r.asset_materializations_for_node("duel_episodes")[0].metadata
        print("RESULT", md["model_calls"].value, md["cache_hits"].value, md["num_rows"].value)
""")


@pytest.mark.slow
def test_killed_pair_run_resumes_without_repeating_calls_or_duplicating_rows(tmp_path):
    registry = write_registry(tmp_path / "models.yaml", ["apprentice", "journeyman"])
    script = tmp_path / "resume.py"
    script.write_text(RESUME_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    run = lambda *a: [sys.executable, str(script), str(tmp_path), str(registry), *a]  # noqa: E731
    subprocess.run(run("0", "author"), check=True, env=env, capture_output=True)
    cache = tmp_path / "cache" / "calls.sqlite"
    authored_calls = sqlite3.connect(cache).execute("SELECT count(*) FROM calls").fetchone()[0]

    proc = subprocess.Popen(run("40", "pair"), env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 180  # generous: the child imports Dagster first, and CI machines may be loaded
    cached = 0
    while time.time() < deadline and cached < authored_calls + 10:
        time.sleep(0.05)
        cached = sqlite3.connect(cache).execute("SELECT count(*) FROM calls").fetchone()[0]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before_kill = sqlite3.connect(cache).execute("SELECT count(*) FROM calls").fetchone()[0] - authored_calls
    assert done_before_kill >= 10
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM episodes").fetchone()[0] == 0  # nothing half-written

    out = subprocess.run(run("0", "pair"), check=True, env=env, capture_output=True, text=True).stdout
    model_calls, cache_hits, rows = map(int, out.split("RESULT")[1].split())
    assert cache_hits >= done_before_kill  # every call made before the kill was reused
    total = sqlite3.connect(cache).execute("SELECT count(*) FROM calls").fetchone()[0] - authored_calls
    assert model_calls + cache_hits >= total and model_calls == total - done_before_kill
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as conn:
        n, distinct = conn.execute(
            "SELECT count(*), count(DISTINCT (env_id, condition, seed)) FROM episodes").fetchone()
    assert n == distinct == rows > 0
