"""Killing ``envduels demo`` while its dbt build runs (issue 33 item 8): before, the dbt child went on writing
the warehouse after the demo was gone (SIGTERM, SIGKILL) and held its lock. Now dbt dies with the demo
(``assets/marts/dbt_cli.die_with_parent``), the warehouse opens for writing right after, and every pair the
demo reported is whole: no episode lost, none without its other condition. One real demo per signal, on
two simulated models, one environment, one seed, no co-evolution round."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import duckdb
import pytest

from envduels_dagster.instance.run_launcher import process_started_at
from tests.helpers.cli import ENVDUELS, cli_env  # noqa: F401 - cli_env is a fixture


def dbt_children(parent: int) -> list[int]:
    """Pids of the ``envduels-dbt build`` processes whose parent is ``parent``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and any(b"envduels-dbt" in c for c in cmd) and b"build" in cmd:
            found.append(int(entry.name))
    return found


@pytest.mark.slow
# SIGTERM stands for SIGINT too: Dagster turns a SIGTERM into the SIGINT path (a third real demo cost ~80 s at load 20)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_killing_the_demo_during_dbt_kills_dbt_and_leaves_whole_pairs(cli_env, sig, tmp_path):
    env = {**cli_env, "ENVDUELS_ROUNDS": "0", "PYTHONUNBUFFERED": "1"}
    out = tmp_path / "demo.out"
    with open(out, "w") as fh:
        demo = subprocess.Popen([ENVDUELS, "demo", "--envs-per-author", "1", "--seeds", "1"], env=env, stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline, dbt = time.monotonic() + 600, []
        while not dbt and demo.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            dbt = dbt_children(demo.pid)
        assert dbt, f"no dbt build seen; demo exit {demo.poll()}: {out.read_text()[-2000:]}"
        time.sleep(1.0)  # dbt is connected and building
        os.kill(demo.pid, sig)
        code = demo.wait(timeout=120)
        assert code == (-sig if sig == signal.SIGKILL else 130), out.read_text()[-2000:]  # dagster maps TERM to INT
        t0 = time.monotonic()
        while process_started_at(dbt[0]) is not None and time.monotonic() - t0 < 15:
            time.sleep(0.1)
        assert process_started_at(dbt[0]) is None, f"dbt (pid {dbt[0]}) outlived the demo ({sig.name})"
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()

    log = out.read_text()
    reported = {tuple(m[:2]): int(m[2]) for m in re.findall(r"pair \d+/\d+\] (\S+) -> (\S+): (\d+) episodes", log)}
    assert len(reported) == 4, log
    warehouse = Path(env["ENVDUELS_HOME"]) / "warehouse.duckdb"
    with duckdb.connect(str(warehouse)) as conn:  # for writing: nobody holds the lock any more
        stored = dict(((a, s), n) for a, s, n in conn.execute(
            "SELECT author, solver, count(*) FROM episodes GROUP BY ALL").fetchall())
        halves = conn.execute("SELECT author, solver, env_id, seed FROM episodes GROUP BY ALL "
                              "HAVING count(*) <> 2 OR count(DISTINCT condition) <> 2").fetchall()
    assert {k: v for k, v in reported.items() if v} == stored and halves == []
