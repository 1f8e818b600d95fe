"""The dbt plugin waits for a brief writer instead of failing the mart build (real processes, real locks).

DuckDB lets one process write a file. A step of the same run (the multiprocess executor overlaps
``model_registry`` with the dbt build) or a pair run can hold the warehouse for a moment; the build used to
fail at once on "Could not set lock" (seen in the live-flow test).
"""

from __future__ import annotations

import subprocess
import sys
import time

import duckdb
import pytest

from envduels_dagster.dbt_plugins.warehouse import attach_warehouse

HOLD = """
import sys, time, duckdb
conn = duckdb.connect(sys.argv[1])
conn.execute("CREATE TABLE IF NOT EXISTS t AS SELECT 42 AS x")
print("HOLDING", flush=True)
time.sleep(float(sys.argv[2]))
conn.close()
"""


def hold_lock(path, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "HOLDING"
    return proc


def test_the_attach_waits_for_a_writer_that_lets_go(tmp_path):
    db = tmp_path / "warehouse.duckdb"
    holder = hold_lock(db, 1.5)
    start = time.monotonic()
    conn = duckdb.connect(":memory:")
    attach_warehouse(conn, str(db), wait_s=30)
    waited = time.monotonic() - start
    assert conn.execute("SELECT x FROM warehouse.t").fetchall() == [(42,)]  # the holder's committed row
    assert waited >= 0.5  # it really waited for the holder, which held the lock for 1.5 s
    holder.wait(10)


def test_the_attach_gives_up_with_duckdbs_lock_message_after_its_wait(tmp_path):
    db = tmp_path / "warehouse.duckdb"
    holder = hold_lock(db, 20)
    try:
        conn = duckdb.connect(":memory:")
        start = time.monotonic()
        with pytest.raises(duckdb.IOException, match="Could not set lock"):
            attach_warehouse(conn, str(db), wait_s=1.0)
        assert time.monotonic() - start < 10
        assert conn.execute("SELECT count(*) FROM duckdb_databases() WHERE database_name = 'warehouse'").fetchone() == (0,)
    finally:
        holder.kill()
        holder.wait(10)


def test_other_io_errors_are_not_retried(tmp_path):
    conn = duckdb.connect(":memory:")
    start = time.monotonic()
    with pytest.raises(duckdb.IOException):
        attach_warehouse(conn, str(tmp_path / "missing-dir" / "warehouse.duckdb"), wait_s=30)
    assert time.monotonic() - start < 5
