"""The live flow a user runs, through the real daemon: ``envduels demo`` on three models, ``dagster dev``,
then a fourth model appended to the registry while it runs.

What must hold when nothing is queued or running any more: every run succeeded; the newcomer has
partitions in every round; round 0 of the marts equals a from-scratch run on the four models; training
sets agree wherever their inputs agree; and the marts were refreshed at most once per request.
"""

from __future__ import annotations

import concurrent.futures

import duckdb
import pandas as pd
import pytest

from tests.helpers.daemon import add_model_live, live_env, run_demo, write_sim_registry

pytestmark = pytest.mark.slow

FIRST, ADDED = ["oracle", "journeyman", "novice"], "expert"
MART_KEYS = {"pair_lift", "env_solver_stats", "author_scores", "solver_scores", "duels"}
# Three environments per author and 2 s ticks (the request and automation sensors) keep this to a few
# minutes on 2 cores (267 s alone, 400-500 s inside the CPU-bound suite, 1 Dec 2026; docs/BENCHMARKS.md); the flow is the
# same at the default size and tick. The fixed admission rule: the probability admission fits one prior on
# every learner's rows, so a learner's set also depends on rounds the frozen panel leaves different from a
# from-scratch run, and "training sets agree wherever their inputs agree" would compare nothing.
SMALL = {"ENVDUELS_ENVS_PER_AUTHOR": "3", "ENVDUELS_SEEDS": "4", "ENVDUELS_SENSOR_INTERVAL_S": "2",
         "ENVDUELS_AUTOMATION_INTERVAL_S": "2", "ENVDUELS_TRAINING_ADMISSION": "rule"}


def _table(db, sql: str) -> pd.DataFrame:
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(sql).df()


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    home = tmp_path_factory.mktemp("live")
    scratch = home / "scratch"
    scratch.mkdir()
    write_sim_registry(scratch / "models.yaml", [*FIRST, ADDED])
    # The from-scratch run is independent of the live one (its own home): it runs meanwhile, in a thread
    # that waits on its process, and quiet_s stays well above the daemon's gap between request stages.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        from_scratch = pool.submit(run_demo, live_env(scratch, scratch / "models.yaml", **SMALL), scratch / "demo.log")
        result = add_model_live(home / "live", FIRST, ADDED, quiet_s=30, timeout_s=1200, **SMALL)
        from_scratch.result()
    return result, home / "live" / "warehouse.duckdb", scratch / "warehouse.duckdb"


def test_every_run_the_daemon_launched_succeeded(live):
    result, _, _ = live
    assert result.settled, f"runs still active or none launched; see {result.log}"
    failed = [(r.job_name, r.partition, r.assets) for r in result.runs if r.status != "SUCCESS"]
    assert not failed, f"{len(failed)} of {len(result.runs)} runs did not succeed: {failed}"


def test_every_run_that_calls_a_model_carries_its_provider_tag(live):
    result, _, _ = live
    calling = [r for r in result.runs if "|" in (r.partition or "") or r.job_name in ("author_job",)
               or r.job_name.startswith("hardened_r") or "dagster/asset_partition_range_start" in r.tags]
    assert calling and all(r.tags.get("envduels/provider") == "envduels-sim" for r in calling)


def test_pair_stages_run_in_batches_not_one_run_per_pair(live):
    result, _, _ = live
    pair_runs = [r for r in result.runs if r.job_name == "pair_job" or r.job_name.startswith("pairs_r")]
    per_round = 2 * len(FIRST) + 1  # the newcomer's row and column
    assert pair_runs and all("dagster/asset_partition_range_start" in r.tags for r in pair_runs)
    assert len(pair_runs) < per_round * len({r.job_name for r in pair_runs})


def test_the_new_model_has_partitions_in_every_round(live):
    _, db, _ = live
    envs = _table(db, f"SELECT round, count(*) AS n FROM environments WHERE author = '{ADDED}' GROUP BY round")
    eps = _table(db, f"SELECT round, count(DISTINCT author || '|' || solver) AS pairs FROM episodes "
                     f"WHERE author = '{ADDED}' OR solver = '{ADDED}' GROUP BY round")
    assert sorted(envs["round"]) == [0, 1]
    assert dict(zip(eps["round"], eps["pairs"])) == {0: 7, 1: 7}  # 2N+1 with N = 3


def test_round_zero_marts_equal_a_from_scratch_run(live):
    _, db, scratch = live
    cols = "round, author, solver, n_envs, p_cold, p_hint, lift, lift_ci_lower, lift_ci_upper, lift_ci_reason, lift_boot_lower"
    sql = f"SELECT {cols} FROM pair_lift WHERE round = 0 ORDER BY author, solver"
    got, want = _table(db, sql), _table(scratch, sql)
    assert len(want) == 16
    pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_training_sets_agree_wherever_their_inputs_agree(live):
    _, db, scratch = live
    sql = "SELECT learner, env_id, p_cold, p_hint FROM training_set ORDER BY learner, env_id"
    got, want = _table(db, sql), _table(scratch, sql)
    # inputs agree: the environment and every one of its episodes for that learner are identical in both
    ep = ("SELECT env_id, solver AS learner, string_agg(condition || seed || status, ',' ORDER BY condition, seed) AS k "
          "FROM episodes GROUP BY ALL")
    same = _table(db, ep).merge(_table(scratch, ep), on=["env_id", "learner", "k"])[["env_id", "learner"]]
    got = got.merge(same, on=["env_id", "learner"]).reset_index(drop=True)
    want = want.merge(same, on=["env_id", "learner"]).reset_index(drop=True)
    assert len(want) > 0
    pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_the_marts_were_refreshed_at_most_once_per_request(live):
    result, _, _ = live
    refreshes = [r for r in result.runs if MART_KEYS & set(r.assets) or r.job_name == "downstream_job"]
    requests = {r.tags.get("envduels/request") for r in result.runs if r.tags.get("envduels/request")}
    assert len(requests) >= 1
    assert 1 <= len(refreshes) <= len(requests), [(r.job_name, r.tags.get("envduels/request")) for r in refreshes]
