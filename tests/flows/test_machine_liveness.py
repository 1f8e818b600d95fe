"""A dead machine's runs are failed by the machines that survive it (issue 46).

With one shared instance, a run's pid can only be looked up on its own machine (issue 33), so when a whole
machine died (a killed container) no daemon ever failed its runs: they stayed STARTED and held queue slots.
Each machine's launcher now reports itself alive whenever it checks its own workers (run monitoring, every
poll); another machine's run is failed once its machine has reported and then been silent for
``machine_silent_seconds``. A real instance and real processes; the two machines are two hostnames given to
the launcher module (deploy/cluster-check runs the same with two containers that have their own hostnames).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from envduels_dagster.instance import run_launcher
from envduels_dagster.instance.run_launcher import HOST_TAG, PID_TAG, SEEN_KEY, WorkerCheckingRunLauncher


def _on(monkeypatch, host: str) -> None:
    monkeypatch.setattr(run_launcher.socket, "gethostname", lambda: host)


@pytest.fixture
def instance():
    import dagster as dg

    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


def _launcher(instance, silent_s: float) -> WorkerCheckingRunLauncher:
    launcher = WorkerCheckingRunLauncher(machine_silent_seconds=silent_s)
    launcher.register_instance(instance)
    return launcher


def _run(instance, tags, started: bool = False):
    from dagster._core.events import DagsterEvent, DagsterEventType
    from dagster._core.storage.dagster_run import DagsterRun

    run = instance.add_run(DagsterRun(job_name="hold_job", tags=tags))
    if started:
        instance.report_dagster_event(DagsterEvent(DagsterEventType.RUN_START.value, "hold_job"), run.run_id)
    return run


def _health(launcher, run):
    result = launcher.check_run_worker_health(run)
    return result.status.value, result.msg or ""


def test_a_silent_machines_run_is_failed_by_another_machine(instance, monkeypatch):
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        launcher = _launcher(instance, silent_s=1.0)
        run = _run(instance, {HOST_TAG: "machine-a", PID_TAG: str(worker.pid)})
        _on(monkeypatch, "machine-a")  # machine-a's daemon checks its own worker: alive, and says so
        assert _health(launcher, run) == ("RUNNING", f"pid {worker.pid} is alive")
        seen = float(instance.run_storage.get_cursor_values({SEEN_KEY + "machine-a"})[SEEN_KEY + "machine-a"])
        assert abs(seen - time.time()) < 5
        _on(monkeypatch, "machine-b")  # within the silence allowed: not checkable from here, as before
        assert _health(launcher, run) == ("RUNNING", "worker not checkable from this machine")
        time.sleep(1.5)  # machine-a dies: its daemon reports no more
        status, msg = _health(launcher, run)
        assert status == "FAILED", msg
        assert "machine 'machine-a'" in msg and "has not reported itself alive for" in msg
        assert "machine_silent_seconds" in msg
        assert worker.poll() is None  # judged by the silence only: nothing was killed from here
    finally:
        worker.kill()
        worker.wait()


def test_a_machine_that_never_reported_keeps_its_runs(instance, monkeypatch):
    """A webserver without a daemon (issue 33) launches runs but never checks them: never taken for dead."""
    launcher = _launcher(instance, silent_s=0.0)
    run = _run(instance, {HOST_TAG: "webserver-only", PID_TAG: str(os.getpid())})
    _on(monkeypatch, "machine-b")
    time.sleep(0.1)
    assert _health(launcher, run) == ("RUNNING", "worker not checkable from this machine")


def test_the_silence_counts_from_the_runs_start_when_that_is_later(instance, monkeypatch):
    """A machine idle for an hour, then launching a run: not failed before its daemon's next poll."""
    instance.run_storage.set_cursor_values({SEEN_KEY + "machine-a": repr(time.time() - 3600)})
    launcher = _launcher(instance, silent_s=30.0)
    fresh = _run(instance, {HOST_TAG: "machine-a"}, started=True)
    stale = _run(instance, {HOST_TAG: "machine-a"})  # no start recorded: the last report is all there is
    _on(monkeypatch, "machine-b")
    assert _health(launcher, fresh)[0] == "RUNNING"
    assert _health(launcher, stale)[0] == "FAILED"


def test_the_silence_allowed_is_set_in_the_instance_config(tmp_path):
    import dagster as dg

    (tmp_path / "dagster.yaml").write_text(
        "run_launcher:\n  module: envduels_dagster.instance.run_launcher\n  class: WorkerCheckingRunLauncher\n"
        "  config:\n    machine_silent_seconds: 45\n")
    with dg.DagsterInstance.from_config(str(tmp_path)) as inst:
        assert inst.run_launcher.machine_silent_seconds == 45.0
    (tmp_path / "dagster.yaml").write_text(
        "run_launcher:\n  module: envduels_dagster.instance.run_launcher\n  class: WorkerCheckingRunLauncher\n")
    with dg.DagsterInstance.from_config(str(tmp_path)) as inst:
        assert inst.run_launcher.machine_silent_seconds == run_launcher.MACHINE_SILENT_S
