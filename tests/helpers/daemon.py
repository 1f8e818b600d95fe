"""Drive the live flow a user runs: ``envduels demo``, then ``dagster dev`` (webserver + daemon) on
127.0.0.1, then a model appended to the registry while it runs.

Why a real daemon: ``materialize`` in a test proves an asset, not the sensor, the automation conditions,
the run queue and the blocking checks working together. Everything here goes through the same commands
and files a user touches (the registry file, ``DAGSTER_HOME``); the test only reads the instance.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_sim_registry(path: Path, names: list[str], roles: dict[str, str] | None = None) -> None:
    """A registry of simulated models named by their profiles; ``roles`` maps a name to its roles (e.g.
    ``"[solver]"``: a target learner that writes nothing); a name not in it has both (the default)."""
    roles = roles or {}
    path.write_text("models:\n" + "".join(f"  - name: {n}\n    model: envduels-sim/{n}\n"
                                          + (f"    roles: {roles[n]}\n" if n in roles else "") for n in names))


def live_env(home: Path, registry: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVDUELS_", "DAGSTER_"))}
    env.update(ENVDUELS_HOME=str(home), ENVDUELS_REGISTRY=str(registry), DAGSTER_HOME=str(home / "dagster"),
               PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", PYTHONUNBUFFERED="1", **extra)
    return env


def run_demo(env: dict[str, str], log: Path, args: list[str] | None = None) -> None:
    """``envduels demo`` with ``args``; without them, at the size the env sets (ENVDUELS_ENVS_PER_AUTHOR), if any."""
    size = ["--envs-per-author", env["ENVDUELS_ENVS_PER_AUTHOR"]] if env.get("ENVDUELS_ENVS_PER_AUTHOR") else []
    with open(log, "w") as out:
        proc = subprocess.run([str(BIN / "envduels"), "demo", *(size if args is None else args)], cwd=REPO, env=env, stdout=out,
                              stderr=subprocess.STDOUT, timeout=900)
    if proc.returncode != 0:
        raise AssertionError(f"envduels demo failed (rc={proc.returncode}); log: {log}\n{log.read_text()[-3000:]}")


@dataclasses.dataclass
class RunInfo:
    run_id: str
    job_name: str
    status: str
    tags: dict
    assets: list[str]
    partition: str | None
    created: float
    ended: float | None


@dataclasses.dataclass
class LiveResult:
    runs: list[RunInfo]
    wall_s: float
    settled: bool
    log: Path

    def by_status(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.runs:
            out[r.status] = out.get(r.status, 0) + 1
        return out


def runs_since(instance, since: float) -> list[RunInfo]:
    import dagster as dg

    records = instance.get_run_records(dg.RunsFilter(created_after=_dt(since)))
    out = []
    for rec in records:
        run = rec.dagster_run
        keys = sorted(k.to_user_string() for k in (run.asset_selection or []))
        out.append(RunInfo(run.run_id, run.job_name, run.status.value, dict(run.tags), keys,
                           run.tags.get("dagster/partition"), rec.create_timestamp.timestamp(),
                           rec.end_time))
    return sorted(out, key=lambda r: r.created)


def _dt(ts: float):
    import datetime as dt

    return dt.datetime.fromtimestamp(ts, tz=dt.UTC)


class DagsterDev:
    """``dagster dev -w workspace.yaml`` (or another workspace) on 127.0.0.1 in its own process group."""

    def __init__(self, env: dict[str, str], log: Path, workspace: Path = REPO / "workspace.yaml"):
        self.port = free_port()
        self.log = log
        self._out = open(log, "w")
        self.proc = subprocess.Popen(
            [str(BIN / "dagster"), "dev", "-w", str(workspace), "-h", "127.0.0.1", "-p", str(self.port)],
            cwd=REPO, env=env, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"dagster dev exited early; log {self.log}:\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/server_info", timeout=2):
                    return
            except OSError:
                time.sleep(1)
        raise AssertionError(f"dagster dev not ready in {timeout}s; log {self.log}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._out.close()


def wait_for(predicate, timeout_s: float, what: str, poll: float = 0.5):
    """Poll ``predicate`` until it returns something truthy (returned), or fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"not within {timeout_s} s: {what}")


ACTIVE = {"QUEUED", "NOT_STARTED", "STARTING", "STARTED", "CANCELING"}


def wait_for_ticks(instance, sensor: str, after: float, n: int = 2, timeout_s: float = 180) -> int:
    """Wait until the daemon finished ``n`` ticks of ``sensor`` that started after ``after`` (epoch s)."""
    deadline = time.monotonic() + timeout_s
    done = 0
    while time.monotonic() < deadline:
        states = [s for s in instance.all_instigator_state() if s.name == sensor]
        ticks = [t for s in states for t in instance.get_ticks(s.instigator_origin_id, s.selector_id, after=after)]
        done = sum(t.status.value != "STARTED" for t in ticks)  # SUCCESS, SKIPPED or FAILURE: evaluated
        if done >= n:
            return done
        time.sleep(1)
    raise AssertionError(f"{sensor}: {done} of {n} ticks after {after} within {timeout_s}s")


def requests_open(instance) -> int | None:
    """How many requests the ``envduels_requests`` sensor's cursor holds open (None: no cursor yet)."""
    from envduels_dagster.core.requests.stages import RequestBook

    states = [s for s in instance.all_instigator_state() if s.name == "envduels_requests"]
    cursors = [getattr(s.instigator_data, "cursor", None) for s in states]
    cursors = [c for c in cursors if c]
    return len(RequestBook.from_json(cursors[0]).open) if cursors else None


def wait_until_settled(instance, since: float, quiet_s: float, timeout_s: float, first_run_timeout_s: float = 180):
    """Poll until runs created after ``since`` exist, none is active, and no new run came for ``quiet_s``.

    Or sooner, once the request sensor has no open request: then nothing is active and the request and
    automation sensors each finished two ticks that saw it so, with no new run meanwhile (the sensors are the
    only launchers; the fixed ``quiet_s`` had to outlast the daemon's longest gap between stages, under load)."""
    t0 = time.monotonic()
    last_change, last_sig = time.monotonic(), None
    while time.monotonic() - t0 < timeout_s:
        runs = runs_since(instance, since)
        sig = tuple((r.run_id, r.status) for r in runs)
        if sig != last_sig:
            last_sig, last_change = sig, time.monotonic()
        active = [r for r in runs if r.status in ACTIVE]
        if not runs and time.monotonic() - t0 > first_run_timeout_s:
            return runs, False
        if runs and not active and time.monotonic() - last_change >= quiet_s:
            return runs, True
        if runs and not active and requests_open(instance) == 0:
            seen = time.time()
            for sensor in ("envduels_requests", "envduels_automation"):
                wait_for_ticks(instance, sensor, after=seen, n=2, timeout_s=max(60.0, timeout_s / 10))
            again = runs_since(instance, since)
            if tuple((r.run_id, r.status) for r in again) == sig and requests_open(instance) == 0:
                return again, True
            continue
        time.sleep(3)
    return runs_since(instance, since), False


def add_model_live(home: Path, first: list[str], added: str, quiet_s: float = 100, timeout_s: float = 1500,
                   **extra_env: str) -> LiveResult:
    """Demo on ``first``, then ``dagster dev``; append ``added`` to the registry; wait until nothing runs."""
    return add_models_live(home, first, [[added]], quiet_s=quiet_s, timeout_s=timeout_s, **extra_env)[0]


def add_models_live(home: Path, first: list[str], steps: list[list[str]], roles: dict[str, str] | None = None,
                    quiet_s: float = 100, timeout_s: float = 1500, demo_args: list[str] | None = None,
                    before_steps: Callable[[Any, float], None] | None = None, **extra_env: str) -> list[LiveResult]:
    """Demo on ``first`` (``demo_args`` on its command line, as ``run_demo``), then ``dagster dev``; for each step,
    append its models to the registry (``roles`` as in ``write_sim_registry``) and wait until nothing runs; one
    result per step, its runs those created after it. One daemon session serves every step: each step is a
    registry change the running daemon must pick up. ``before_steps(instance, started)`` runs once the daemon is
    up, before the first step (``started``: when ``dagster dev`` started, epoch s): the finished demo as the daemon
    first sees it. Without it the daemon gets 5 s."""
    import dagster as dg

    home.mkdir(parents=True, exist_ok=True)
    registry = home / "models.yaml"
    write_sim_registry(registry, first, roles)
    env = live_env(home, registry, **extra_env)
    run_demo(env, home / "demo.log", demo_args)
    started = time.time()
    dev = DagsterDev(env, home / "dagster-dev.log")
    results: list[LiveResult] = []
    try:
        dev.wait_ready()
        old = os.environ.get("DAGSTER_HOME")
        os.environ["DAGSTER_HOME"] = env["DAGSTER_HOME"]
        try:
            with dg.DagsterInstance.get() as instance:
                if before_steps is None:
                    time.sleep(5)  # let the daemon's first sensor ticks see the unchanged registry
                else:
                    before_steps(instance, started)
                names = list(first)
                for added in steps:
                    t_added = time.time()
                    names += added
                    write_sim_registry(registry, names, roles)
                    runs, settled = wait_until_settled(instance, t_added, quiet_s, timeout_s)
                    wall = max((r.ended or r.created) for r in runs) - t_added if runs else 0.0
                    results.append(LiveResult(runs, wall, settled, dev.log))
                    if not settled:
                        break
        finally:
            if old is None:
                os.environ.pop("DAGSTER_HOME", None)
            else:
                os.environ["DAGSTER_HOME"] = old
        return results
    finally:
        dev.stop()
