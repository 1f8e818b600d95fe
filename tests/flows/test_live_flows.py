"""The live flow a user runs, through the real daemon: ``envduels demo`` on three models, ``dagster dev``,
then a fourth model appended to the registry while it runs, then (same daemon session) a target learner
(``roles: [solver]``, issue 30).

The demo's sizes are on its command line only, as a user types them (issue 41): before, the request sensor
found every author stale (the sizes were not the defaults) and re-ran the whole experiment at 10 x 8. Now they
are stored with the experiment, so the daemon on the finished demo launches nothing and leaves the warehouse
unchanged, and the newcomer runs at the stored sizes.

What must hold when nothing is queued or running any more: every run succeeded; the newcomer has
partitions in every round; round 0 of the marts equals a from-scratch run on the four models; training
sets agree wherever their inputs agree; and the marts were refreshed at most once per request. The learner
added next plays only its column (every author x the learner, in every round), authors nothing, and gets its
training set from the running daemon.
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
import time

import duckdb
import pandas as pd
import pytest

from envduels_dagster.assets.registry.requests import REQUEST_TAG, STAGE_TAG
from envduels_dagster.assets.registry.stage_end import LAUNCHED_BY_TAG
from tests.helpers.daemon import add_models_live, live_env, run_demo, runs_since, wait_for_ticks, write_sim_registry

pytestmark = pytest.mark.slow

FIRST, ADDED = ["oracle", "journeyman", "novice"], "expert"
LEARNER = "apprentice"  # added after ADDED with roles: [solver]: a target learner that writes nothing
AUTHORS = sorted([*FIRST, ADDED])
MART_KEYS = {"pair_lift", "env_solver_stats", "author_scores", "solver_scores", "duels"}
# Three environments per author and 2 s ticks (the request and automation sensors) keep this to a few
# minutes on 2 cores (267 s alone, 400-500 s inside the CPU-bound suite, 1 Dec 2026; docs/BENCHMARKS.md); the flow is the
# same at the default size and tick. The fixed admission rule: the probability admission fits one prior on
# every learner's rows, so a learner's set also depends on rounds the frozen panel leaves different from a
# from-scratch run, and "training sets agree wherever their inputs agree" would compare nothing.
SIZES = {"ENVDUELS_ENVS_PER_AUTHOR": "3", "ENVDUELS_SEEDS": "4"}
TICKS = {"ENVDUELS_SENSOR_INTERVAL_S": "2", "ENVDUELS_AUTOMATION_INTERVAL_S": "2", "ENVDUELS_TRAINING_ADMISSION": "rule"}
SMALL = {**SIZES, **TICKS}
# What "the daemon left the finished demo alone" compares: every row of the tables a re-run would rewrite.
ROWS = {
    "environments": "SELECT env_id, author, round, source_sha256, valid, benchmark_seeds::VARCHAR FROM environments ORDER BY 1",
    "episodes": "SELECT env_id, solver, condition, seed, status, turns FROM episodes ORDER BY 1, 2, 3, 4",
    "pair_lift": "SELECT round, author, solver, n_envs, lift FROM pair_lift ORDER BY 1, 2, 3",
}


def _rows(db) -> dict[str, list]:
    for _ in range(60):  # a sensor tick may hold the file for a moment
        try:
            with duckdb.connect(str(db), read_only=True) as conn:
                return {name: conn.execute(sql).fetchall() for name, sql in ROWS.items()}
        except duckdb.IOException:
            time.sleep(1)
    raise AssertionError(f"{db} stayed locked")


def _table(db, sql: str) -> pd.DataFrame:
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(sql).df()


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    home = tmp_path_factory.mktemp("live")
    scratch = home / "scratch"
    scratch.mkdir()
    write_sim_registry(scratch / "models.yaml", [*FIRST, ADDED])
    db = home / "live" / "warehouse.duckdb"
    idle: dict = {}

    def daemon_on_the_finished_demo(instance, started: float) -> None:
        # the sensor's first ticks look for stale partitions (the first look is immediate) and for partitions
        # run outside a request: on a finished experiment, neither launches anything
        idle["before"] = _rows(db)
        wait_for_ticks(instance, "envduels_requests", after=time.time(), n=3, timeout_s=240)
        idle["runs"], idle["after"] = runs_since(instance, started), _rows(db)

    # The from-scratch run is independent of the live one (its own home): it runs meanwhile, in a thread
    # that waits on its process, and quiet_s stays well above the daemon's gap between request stages.
    # The live home has no size variable anywhere: the demo's sizes are on its command line only.
    demo_args = ["--envs-per-author", SIZES["ENVDUELS_ENVS_PER_AUTHOR"], "--seeds", SIZES["ENVDUELS_SEEDS"]]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        from_scratch = pool.submit(run_demo, live_env(scratch, scratch / "models.yaml", **SMALL), scratch / "demo.log")
        steps = add_models_live(home / "live", FIRST, [[ADDED], [LEARNER]], roles={LEARNER: "[solver]"},
                                quiet_s=30, timeout_s=1200, demo_args=demo_args,
                                before_steps=daemon_on_the_finished_demo, **TICKS)
        from_scratch.result()
    assert len(steps) == 2, f"the first step did not settle; see {steps[0].log}"
    newcomer, learner = steps
    return newcomer, db, scratch / "warehouse.duckdb", learner, idle


@pytest.fixture(scope="module")
def live_newcomer(live):
    """(the newcomer's step, live warehouse, from-scratch warehouse): what the tests before issue 30 read."""
    return live[:3]


def test_the_sizes_typed_on_the_demos_command_line_are_stored_with_the_experiment(live):
    home = live[1].parent
    stored = json.loads((home / "experiment.json").read_text())
    assert (stored["envs_per_author"], stored["seeds"]) == (3, 4)
    assert stored["registry"] == str(home / "models.yaml")


def test_the_daemon_on_a_finished_demo_launches_nothing_and_leaves_the_warehouse_unchanged(live):
    idle = live[4]
    assert idle["runs"] == [], [(r.job_name, r.partition) for r in idle["runs"]]
    assert idle["after"] == idle["before"]
    assert len(idle["before"]["episodes"]) > 0


def test_the_newcomer_runs_only_its_partitions_at_the_stored_sizes_and_keeps_every_old_row(live):
    newcomer, db, _, _, idle = live
    assert {r.partition for r in newcomer.runs if r.job_name == "author_job"} == {ADDED}
    with duckdb.connect(str(db), read_only=True) as conn:
        written = conn.execute("SELECT count(*), list(DISTINCT benchmark_seeds) FROM environments "
                               "WHERE author = ? AND round = 0", [ADDED]).fetchone()
    assert written == (3, [[0, 1, 2, 3]])  # the stored sizes, not the defaults' 10 x 8
    after = _rows(db)
    for table in ("environments", "episodes"):  # the old partitions were not re-run: their rows are unchanged
        old_rows = set(idle["before"][table])
        assert old_rows <= set(after[table]), table
        new_rows = [row for row in after[table] if row not in old_rows]
        assert all(ADDED in str(row[:2]) or LEARNER in str(row[:2]) for row in new_rows), new_rows[:5]


def test_every_run_the_daemon_launched_succeeded(live):
    for result in (live[0], live[3]):
        assert result.settled, f"runs still active or none launched; see {result.log}"
        failed = [(r.job_name, r.partition, r.assets) for r in result.runs if r.status != "SUCCESS"]
        assert not failed, f"{len(failed)} of {len(result.runs)} runs did not succeed: {failed}"


def test_every_run_that_calls_a_model_carries_its_provider_tag(live_newcomer):
    result, _, _ = live_newcomer
    calling = [r for r in result.runs if "|" in (r.partition or "") or r.job_name in ("author_job",)
               or r.job_name.startswith("hardened_r") or "dagster/asset_partition_range_start" in r.tags]
    assert calling and all(r.tags.get("envduels/provider") == "envduels-sim" for r in calling)


def test_pair_stages_run_in_batches_not_one_run_per_pair(live_newcomer):
    result, _, _ = live_newcomer
    pair_runs = [r for r in result.runs if r.job_name == "pair_job" or r.job_name.startswith("pairs_r")]
    per_round = 2 * len(FIRST) + 1  # the newcomer's row and column
    assert pair_runs and all("dagster/asset_partition_range_start" in r.tags for r in pair_runs)
    assert len(pair_runs) < per_round * len({r.job_name for r in pair_runs})


def test_the_new_model_has_partitions_in_every_round(live_newcomer):
    _, db, _ = live_newcomer
    envs = _table(db, f"SELECT round, count(*) AS n FROM environments WHERE author = '{ADDED}' GROUP BY round")
    eps = _table(db, f"SELECT round, count(DISTINCT author || '|' || solver) AS pairs FROM episodes "
                     f"WHERE (author = '{ADDED}' OR solver = '{ADDED}') AND solver <> '{LEARNER}' GROUP BY round")
    assert sorted(envs["round"]) == [0, 1]
    assert dict(zip(eps["round"], eps["pairs"])) == {0: 7, 1: 7}  # 2N+1 with N = 3


def test_round_zero_marts_equal_a_from_scratch_run(live_newcomer):
    _, db, scratch = live_newcomer
    cols = "round, author, solver, n_envs, p_cold, p_hint, lift, lift_ci_lower, lift_ci_upper, lift_ci_reason, lift_boot_lower"
    sql = f"SELECT {cols} FROM pair_lift WHERE round = 0 AND solver <> '{LEARNER}' ORDER BY author, solver"
    got, want = _table(db, sql), _table(scratch, sql)
    assert len(want) == 16
    pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_training_sets_agree_wherever_their_inputs_agree(live_newcomer):
    _, db, scratch = live_newcomer
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
    for result in (live[0], live[3]):  # the newcomer's step, then the learner's
        refreshes = [r for r in result.runs if MART_KEYS & set(r.assets) or r.job_name == "downstream_job"]
        requests = {r.tags.get("envduels/request") for r in result.runs if r.tags.get("envduels/request")}
        assert len(requests) >= 1
        assert 1 <= len(refreshes) <= len(requests), [(r.job_name, r.tags.get("envduels/request")) for r in refreshes]


def test_a_learner_added_to_the_running_daemon_plays_only_its_column(live):
    """Issue 30 through the running daemon (request sensor, run queue, automation): a ``roles: [solver]`` model
    appended to the registry gets only its pairs, each author x the learner, in round 0 and round 1, and its own
    training set and author value; nothing is authored or hardened and no other pair is replayed."""
    _, db, _, learner, _ = live
    jobs = {r.job_name for r in learner.runs}
    assert "author_job" not in jobs and not any(j.startswith("hardened_r") for j in jobs), sorted(jobs)
    column = [f"{a}|{LEARNER}" for a in AUTHORS]
    played = _table(db, "SELECT round, author || '|' || solver AS pair, count(*) AS n FROM episodes "
                        "GROUP BY ALL ORDER BY ALL")
    mine = played[played["pair"].str.endswith(f"|{LEARNER}")]
    assert {r: sorted(g["pair"]) for r, g in mine.groupby("round")} == {0: column, 1: column}
    assert _table(db, f"SELECT count(*) AS n FROM environments WHERE author = '{LEARNER}'")["n"][0] == 0
    pair_runs = [r for r in learner.runs if r.job_name == "pair_job" or r.job_name.startswith("pairs_r")]
    starts = {r.tags.get("dagster/asset_partition_range_start", r.partition) for r in pair_runs}
    ends = {r.tags.get("dagster/asset_partition_range_end", r.partition) for r in pair_runs}
    assert all(k.endswith(f"|{LEARNER}") for k in starts | ends), (starts, ends)  # only the learner's column ran
    learner_runs = [r for r in learner.runs if r.job_name == "learner_job"]
    assert LEARNER in {r.partition for r in learner_runs}
    value = _table(db, f"SELECT DISTINCT author FROM author_value WHERE learner = '{LEARNER}' ORDER BY 1")
    assert list(value["author"]) == AUTHORS


def test_the_rankings_say_which_figures_the_mixed_roster_supports(live):
    """After the learner: duels and role separation among the 4 models with both roles, solvers ranked among 5
    (the rankings asset's metadata, as the UI shows it; the strings are core/requests/roster.py's ranking_scope)."""
    import dagster as dg

    _, db, _, _, _ = live
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(db.parent / "dagster"))
        with dg.DagsterInstance.get() as instance:
            (record,) = instance.fetch_materializations(dg.AssetKey("rankings"), limit=1).records
    metadata = {k: v.value for k, v in record.asset_materialization.metadata.items()}
    assert metadata["scope_duels"] == metadata["scope_role_separation"] == metadata["scope_solver_ranking"] == "meaningful"
    assert "among 4 models with both roles" in metadata["meaningful_rankings"], metadata["meaningful_rankings"]
    assert "among 5 solvers" in metadata["meaningful_rankings"] and LEARNER in metadata["meaningful_rankings"]


def _stages(runs) -> dict[str, dict[int, list]]:
    """A step's request runs, by request and stage index."""
    out: dict[str, dict[int, list]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in runs:
        if REQUEST_TAG in r.tags:
            out[r.tags[REQUEST_TAG]][int(r.tags[STAGE_TAG])].append(r)
    return out


def test_no_stage_got_a_run_twice(live):
    """The hooks of a stage's parallel runs and the sensor's ticks all race to launch the next stage (issue 45)."""
    for result in (live[0], live[3]):
        request_runs = [r for r in result.runs if REQUEST_TAG in r.tags]
        keys = collections.Counter(r.tags.get("dagster/run_key") for r in request_runs)
        assert request_runs and None not in keys and max(keys.values()) == 1, keys
        for request, stages in _stages(result.runs).items():  # and no two runs of a stage cover one partition
            for index, runs in stages.items():
                covered = [r.tags.get("dagster/partition") or r.tags.get("dagster/asset_partition_range_start")
                           for r in runs]
                assert len(covered) == len(set(covered)), (request, index, covered)


def test_each_stage_but_the_refresh_started_at_the_end_of_the_previous_one(live):
    """Issue 45: the run that ends a stage submits the next stage's runs from its success hook
    (assets/registry/stage_end.py), so the next stage exists by the time the last run ended -- the sensor could
    not be that early: it sees a stage complete only after its last run ended. The downstream refresh is the
    sensor's (it records it in its cursor)."""
    hooked = 0
    for result in (live[0], live[3]):
        by_id = {r.run_id: r for r in result.runs}
        for request, stages in _stages(result.runs).items():
            for index in sorted(stages)[1:]:
                previous, runs = stages.get(index - 1), stages[index]
                assert previous, (request, index, sorted(stages))
                last_end = max(r.ended for r in previous)
                first_created = min(r.created for r in runs)
                if runs[0].job_name == "downstream_job":
                    assert all(LAUNCHED_BY_TAG not in r.tags for r in runs)
                    assert first_created > last_end
                    continue
                launchers = {r.tags.get(LAUNCHED_BY_TAG) for r in runs}
                assert len(launchers) == 1 and None not in launchers, (request, index, launchers)
                assert by_id[launchers.pop()] in previous, (request, index)  # a run of the previous stage
                assert first_created - last_end <= 1.0, (request, index, first_created - last_end)
                hooked += 1
    assert hooked >= 3  # the newcomer's pairs, hardening and round-1 pairs at least
