"""Issue 41 through the real daemon: a demo with sizes given only on its command line, then ``dagster dev`` on the
same home. Before, the request sensor found every author stale (2 seeds is not the default 8) and re-ran the
whole experiment at 10 x 8, replacing the warehouse. Now the sizes are stored with the experiment: the daemon
launches nothing and the warehouse is unchanged; a model added to the registry runs only its new partitions,
at the stored sizes."""

from __future__ import annotations

import json
import os
import subprocess
import time

import duckdb
import pytest

from tests.helpers.daemon import (
    BIN,
    REPO,
    DagsterDev,
    live_env,
    runs_since,
    wait_for_ticks,
    wait_until_settled,
    write_sim_registry,
)

pytestmark = pytest.mark.slow

FIRST, ADDED = ["oracle", "novice"], "expert"
ROWS = {  # what "the warehouse is unchanged" compares: every row of the tables the daemon would rewrite
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


def test_the_daemon_on_a_finished_demo_launches_nothing_and_a_new_model_runs_at_the_stored_sizes(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    registry = home / "models.yaml"
    write_sim_registry(registry, FIRST)
    # no size variable anywhere: the demo's sizes are on its command line only, as a user types them
    env = live_env(home, registry, ENVDUELS_SENSOR_INTERVAL_S="2", ENVDUELS_AUTOMATION_INTERVAL_S="2")
    demo = subprocess.run([str(BIN / "envduels"), "demo", "--envs-per-author", "2", "--seeds", "2", "--rounds", "0"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    stored = json.loads((home / "experiment.json").read_text())
    assert (stored["envs_per_author"], stored["seeds"], stored["rounds"]) == (2, 2, 0)
    assert stored["registry"] == str(registry)
    db = home / "warehouse.duckdb"
    before = _rows(db)
    import dagster as dg

    started = time.time()
    dev = DagsterDev(env, home / "dagster-dev.log")
    old = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = env["DAGSTER_HOME"]
    try:
        dev.wait_ready()
        with dg.DagsterInstance.get() as instance:
            # the sensor's first ticks look for stale partitions (the first look is immediate) and for
            # partitions run outside a request: on a finished experiment, neither launches anything
            wait_for_ticks(instance, "envduels_requests", after=time.time(), n=3, timeout_s=240)
            assert runs_since(instance, started) == []
            assert _rows(db) == before
            added = time.time()
            write_sim_registry(registry, [*FIRST, ADDED])
            runs, settled = wait_until_settled(instance, added, quiet_s=30, timeout_s=900)
    finally:
        if old is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = old
        dev.stop()
    assert settled and runs, f"see {dev.log}"
    assert [(r.job_name, r.partition) for r in runs if r.status != "SUCCESS"] == []
    # only the newcomer's partitions: its authoring and the pairs with it (ranged pair runs are read back below)
    assert {r.partition for r in runs if r.job_name == "author_job"} == {ADDED}
    after = _rows(db)
    with duckdb.connect(str(db), read_only=True) as conn:
        written = conn.execute("SELECT count(*), list(DISTINCT benchmark_seeds) FROM environments "
                               "WHERE author = ?", [ADDED]).fetchone()
        pairs = conn.execute("SELECT DISTINCT author || '|' || solver FROM episodes ORDER BY 1").fetchall()
        rounds = conn.execute("SELECT DISTINCT round FROM environments").fetchall()
    assert written == (2, [[0, 1]])  # the stored sizes, not the defaults' 10 x 8
    assert rounds == [(0,)]  # the stored rounds: no hardening round appeared
    assert {p for (p,) in pairs} == {f"{a}|{s}" for a in [*FIRST, ADDED] for s in [*FIRST, ADDED]}
    # every row the demo wrote is still there, unchanged: the old partitions were not re-run
    for table in ("environments", "episodes"):
        old_rows = set(before[table])
        assert old_rows <= set(after[table]), table
        assert all(ADDED in str(row[:2]) or row in old_rows for row in after[table])
