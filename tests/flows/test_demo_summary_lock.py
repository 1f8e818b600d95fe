"""The demo's summary reads a warehouse another process is writing (issue 33 item 8): the second of two
concurrent demos exited 1 after all its runs had succeeded, because its summary opened the DuckDB file while
the other demo held the write lock. Now each summary read waits for the lock with backoff
(``Warehouse.connect(wait_s=...)``); a lock that outlasts the wait still ends in the CLI's lock message.
Two real processes: a writer holding the file, the demo's summary reading it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb

HOLD = """
import os, sys, time, duckdb
conn = duckdb.connect(sys.argv[1])  # the write lock, as a demo's pair run or dbt build holds it
conn.execute("INSERT INTO pair_lift (round, author, solver, lift) VALUES (0, 'writer', 's', 0.5)")
print("holding", flush=True)
t0 = time.monotonic()
while not os.path.exists(sys.argv[2]) and time.monotonic() - t0 < 120:  # until the test lets go
    time.sleep(0.05)
conn.close()
"""

SUMMARY = """
import argparse, sys
from envduels_dagster.cli.demo import print_summary
try:
    print_summary({"request": "demo-1"}, wait_s=float(sys.argv[1]))
except Exception as exc:
    from envduels_dagster.cli.errors import describe
    message, code = describe(exc, argparse.Namespace(command="demo"))
    print("envduels: error: " + message, file=sys.stderr)
    sys.exit(code)
"""


def make_warehouse(home: Path) -> Path:
    from envduels_dagster.core.storage.warehouse import ensure_schema

    home.mkdir(parents=True)
    path = home / "warehouse.duckdb"
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
    return path


def summary_while_held(home: Path, wait_s: float, release_when: str) -> tuple[str, str, int]:
    """The summary in one process while another holds the warehouse, released once the summary's output has
    shown ``release_when`` (or the summary ended): (stdout, stderr, exit code)."""
    env = {**os.environ, "ENVDUELS_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    path, release = home / "warehouse.duckdb", home.parent / "release"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(release)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline() == "holding\n"
        reader = subprocess.Popen([sys.executable, "-c", SUMMARY, str(wait_s)], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        lines = []
        for line in reader.stdout:
            lines.append(line)
            if release_when in line:
                release.touch()
        stderr = reader.stderr.read()
        code = reader.wait(timeout=120)
    finally:
        release.touch()
        holder.wait(timeout=60)
    assert holder.returncode == 0
    return "".join(lines), stderr, code


def test_the_summary_waits_for_a_writer_and_reads_what_it_wrote(tmp_path):
    home = tmp_path / "home"
    path = make_warehouse(home)
    waiting = f"the warehouse {path} is in use by another process; waiting up to 60 s for it"
    stdout, stderr, code = summary_while_held(home, wait_s=60, release_when=waiting)
    assert code == 0 and stderr == "", stderr  # before: exit 1, "Could not set lock on file"
    assert waiting in stdout and "Round 0 (the benchmark: original authoring)" in stdout
    assert "pair_lift" in next(line for line in stdout.splitlines() if line.startswith("  tables: "))
    with duckdb.connect(str(path), read_only=True) as conn:  # the writer's row is there: nothing lost
        assert conn.execute("SELECT author FROM pair_lift").fetchall() == [("writer",)]


def test_a_lock_that_outlasts_the_wait_is_the_friendly_message_and_nothing_is_written(tmp_path):
    home = tmp_path / "home"
    path = make_warehouse(home)
    stdout, stderr, code = summary_while_held(home, wait_s=1, release_when="never")
    assert code == 1 and "Round 0" not in stdout
    assert stderr == (f"envduels: error: warehouse {path} is in use by another process (a Dagster run or a dbt "
                      "build?); wait for it to finish and run again\n")
    with duckdb.connect(str(path), read_only=True) as conn:
        assert conn.execute("SELECT author FROM pair_lift").fetchall() == [("writer",)]
