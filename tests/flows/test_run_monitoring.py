"""A crash never jams the run queue (issue 33, item 1): run monitoring through the real daemon.

Before: a SIGKILLed ``envduels demo`` or ``envduels import`` left its run STARTED for ever; the queue counted
it against ``max_concurrent_runs`` (3), so after three such crashes no queued run ever started. Here three
processes execute a run each in their own process (as the demo and the import do, tagged by
``run_launcher.worker_tags()``) and are SIGKILLed mid-run; a run is then queued, and ``dagster-daemon``
runs with the project's own dagster.yaml. The killed runs must be marked failed, naming the dead
process, and the queued run must start and succeed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from envduels_dagster.instance.run_launcher import HOST_TAG, PID_TAG, worker_status
from tests.helpers.daemon import BIN, REPO, wait_for, write_sim_registry

FIXTURE = REPO / "tests" / "fixtures" / "monitoring"

HOLD_RUN = textwrap.dedent("""
    import dagster as dg
    from envduels_dagster.instance.run_launcher import worker_tags
    from location import hold
    with dg.DagsterInstance.get() as instance:
        dg.materialize([hold], instance=instance, tags=worker_tags())
""")


def _statuses(instance, run_ids):
    return {r.dagster_run.run_id: r.dagster_run.status.value for r in instance.get_run_records()
            if r.dagster_run.run_id in run_ids}


@pytest.mark.slow
def test_killed_runs_are_failed_by_the_daemon_and_the_queue_starts_the_next_run(tmp_path):
    import dagster as dg

    home = tmp_path / "dagster"
    home.mkdir()
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")  # the project's instance settings, unchanged
    registry = tmp_path / "models.yaml"
    write_sim_registry(registry, ["novice"])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVDUELS_", "DAGSTER_"))}
    env.update(DAGSTER_HOME=str(home), ENVDUELS_HOME=str(tmp_path / "data"), ENVDUELS_REGISTRY=str(registry),
               PYTHONPATH=os.pathsep.join([str(FIXTURE), str(REPO)]), PATH=f"{BIN}{os.pathsep}{env['PATH']}")
    os.environ["DAGSTER_HOME"], old_home = str(home), os.environ.get("DAGSTER_HOME")
    workers = [subprocess.Popen([sys.executable, "-c", HOLD_RUN], cwd=FIXTURE, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL) for _ in range(3)]
    daemon = None
    try:
        with dg.DagsterInstance.get() as instance:
            def started():
                runs = [r.dagster_run for r in instance.get_run_records()]
                live = [r for r in runs if r.status == dg.DagsterRunStatus.STARTED]
                return live if len(live) == 3 else None

            held = wait_for(started, 120, "three runs STARTED in their own processes")
            assert {int(r.tags[PID_TAG]) for r in held} == {w.pid for w in workers}
            assert all(r.tags[HOST_TAG] for r in held)
            for w in workers:  # a crash: no chance to report anything
                w.send_signal(signal.SIGKILL)
                w.wait()
            held_ids = {r.run_id for r in held}
            assert set(_statuses(instance, held_ids).values()) == {"STARTED"}  # what jammed the queue

            launch = subprocess.run([str(BIN / "dagster"), "job", "launch", "-w", str(FIXTURE / "workspace.yaml"),
                                     "-j", "quick_job"], cwd=FIXTURE, env=env, capture_output=True, text=True,
                                    timeout=180)
            assert launch.returncode == 0, launch.stderr[-2000:]
            queued = wait_for(lambda: [r.dagster_run.run_id for r in instance.get_run_records()
                                    if r.dagster_run.job_name == "quick_job"], 30, "the quick run queued")[0]
            assert _statuses(instance, {queued})[queued] == "QUEUED"

            log = open(tmp_path / "daemon.log", "w")
            daemon = subprocess.Popen([str(BIN / "dagster-daemon"), "run", "-w", str(FIXTURE / "workspace.yaml")],
                                      cwd=FIXTURE, env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True)
            t0 = time.monotonic()
            wait_for(lambda: set(_statuses(instance, held_ids).values()) == {"FAILURE"}, 150,
                  f"the killed runs marked failed (daemon log {tmp_path / 'daemon.log'})")
            failed_after = time.monotonic() - t0
            wait_for(lambda: _statuses(instance, {queued})[queued] == "SUCCESS", 150,
                  f"the queued run to start and succeed (daemon log {tmp_path / 'daemon.log'})")
            print(f"killed runs failed {failed_after:.0f} s after the daemon started; queued run done "
                  f"{time.monotonic() - t0:.0f} s after")
            import socket

            # the daemon launched it on a code server of this machine, and recorded which machine (run_launcher)
            assert instance.get_run_by_id(queued).tags.get(HOST_TAG) == socket.gethostname()
            for run_id in held_ids:
                messages = [e.user_message + (e.dagster_event.message or "" if e.dagster_event else "")
                            for e in instance.all_logs(run_id)]
                assert any("is gone: it was killed or crashed" in m for m in messages), messages[-5:]
    finally:
        if daemon is not None:
            os.killpg(daemon.pid, signal.SIGTERM)
            daemon.wait(60)
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
        if old_home is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = old_home


def test_worker_status_tells_a_live_worker_from_a_dead_one_a_zombie_and_a_reused_pid():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert worker_status(proc.pid, time.time()).status.value == "RUNNING"
        # the run started well before this process did: the pid was reused by someone else
        reused = worker_status(proc.pid, time.time() - 3600)
        assert reused.status.value == "FAILED" and "started" in (reused.msg or "")
        proc.kill()
        time.sleep(0.3)  # killed but not reaped: a zombie still has its pid
        assert worker_status(proc.pid, time.time()).status.value == "FAILED"
    finally:
        proc.kill()
        proc.wait()
    gone = worker_status(proc.pid, time.time())
    assert gone.status.value == "FAILED" and f"pid {proc.pid}" in (gone.msg or "")


def _managed_origin():
    """The origin of a run launched on a code server the launching process started (a workspace python_file)."""
    from dagster._core.remote_origin import (
        ManagedGrpcPythonEnvCodeLocationOrigin,
        RemoteJobOrigin,
        RemoteRepositoryOrigin,
    )
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

    location = ManagedGrpcPythonEnvCodeLocationOrigin(
        loadable_target_origin=LoadableTargetOrigin(python_file=str(FIXTURE / "location.py")), location_name="loc")
    return RemoteJobOrigin(RemoteRepositoryOrigin(location, "__repository__"), "hold_job")


def test_a_run_on_another_machine_is_never_declared_dead_by_pid():
    """Issue 33: with one shared instance, a run launched on machine B (a webserver's code server there) had
    its pid looked up by the daemon on machine A, and was failed while it ran. The pid is checked only on the
    machine recorded in the run's HOST_TAG (the demo's and the import's worker_tags, the launcher's launch_run);
    a run of another machine, or with no machine recorded, counts as running (Dagster's run monitoring still
    fails one stuck in STARTING or CANCELING)."""
    import socket

    import dagster as dg
    from dagster._core.storage.dagster_run import DagsterRun

    from envduels_dagster.instance.run_launcher import WorkerCheckingRunLauncher

    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()  # a pid no process has any more
    here = socket.gethostname()
    with dg.DagsterInstance.ephemeral() as instance:
        launcher = WorkerCheckingRunLauncher()
        launcher.register_instance(instance)

        def health(tags, launched=False):
            run = instance.add_run(DagsterRun(job_name="hold_job", tags=tags,
                                              remote_job_origin=_managed_origin() if launched else None))
            if launched:  # what Dagster's DefaultRunLauncher records once the worker started
                instance.report_engine_event(f"Started process for run (pid: {done.pid}).", run)
            result = launcher.check_run_worker_health(run)
            return result.status.value, result.msg or ""

        # in-process runs (demo, import): their own pid tag
        assert health({HOST_TAG: "machine-b", PID_TAG: str(done.pid)}) == (
            "RUNNING", "worker not checkable from this machine")
        assert health({HOST_TAG: here, PID_TAG: str(done.pid)})[0] == "FAILED"
        # launched runs: the pid in Dagster's event, checked only on the machine that launched them
        assert health({HOST_TAG: "machine-b"}, launched=True) == ("RUNNING", "worker not checkable from this machine")
        assert health({}, launched=True)[0] == "RUNNING"  # launched before the host was recorded: unknown
        status, msg = health({HOST_TAG: here}, launched=True)
        assert status == "FAILED" and f"the run's process (pid {done.pid}) is gone" in msg
