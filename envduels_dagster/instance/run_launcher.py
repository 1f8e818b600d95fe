"""The run launcher: Dagster's default launcher that can also tell the daemon whether a run's process is alive.

Why: a run whose process was SIGKILLed (a killed ``envduels demo`` or ``envduels import``, whose runs
execute in the CLI's own process, or a run worker left behind when ``dagster dev`` was killed) stayed
STARTED for ever. The run queue counts it against ``max_concurrent_runs``, so after three such crashes
nothing launched from the UI or the sensor ever started ("3 runs are currently in progress", issue 33).
Dagster's run monitoring (``run_monitoring`` in dagster.yaml) marks such a run failed, but only when the
launcher can check the run's worker, and the default launcher cannot. This one can, for workers on this
machine:

* runs executed in a CLI process carry the tags :data:`HOST_TAG` / :data:`PID_TAG` (``worker_tags()``,
  set by the demo and the import when they create the run);
* runs launched by the daemon or a webserver record their worker's pid in Dagster's own "Started process
  for run (pid: N)" event, on a code server the launching process started (a ``python_module`` /
  ``python_file`` location of the workspace); :meth:`WorkerCheckingRunLauncher.launch_run` tags the run
  with the launching machine (:data:`HOST_TAG`), and the pid is only checked on that machine.

A pid is a number on one machine only: with the shared profile (one Postgres instance), a run launched from
a webserver on machine B and monitored by the daemon on machine A would otherwise have its pid looked up on A
and be failed while it runs (issue 33). A run whose recorded host is another machine, or that has no host
recorded (launched before this tag existed), is never declared dead by pid.

The worker is dead when no such process exists, it is a zombie, or the process with that pid started
after the run did (the pid was reused). A worker that cannot be checked (another machine, no pid
recorded yet) counts as running: Dagster's run monitoring still fails it if it never leaves STARTING
(``start_timeout_seconds``) or CANCELING, and ``run_monitoring.max_runtime_seconds`` (not set) would end a
STARTED one; a Kubernetes launcher checks its pods itself (docs/RELIABILITY.md).

A machine that dies takes its daemon with it, and no other machine can look up its pids (issue 46: two
containers on one instance, one killed). Dagster runs one daemon per instance; when its machine dies, the
daemon is started again elsewhere (a rescheduled pod has a new hostname) and must fail the dead machine's runs.
So the daemon's machine says it is alive: whenever this launcher checks one of its own machine's workers (run
monitoring does, every poll), it writes the time under :data:`SEEN_KEY` + hostname in the shared instance's
key-value store. A run of another machine that has written that and then been silent for
``machine_silent_seconds`` (launcher config, default 120 s: twelve polls) -- counted from the run's start if
that is later -- is failed by the daemon that checks it. A machine that never ran the daemon (a webserver
only: issue 33) never writes it, and its runs stay "not checkable", as before.
"""

from __future__ import annotations

import os
import socket
import time

from dagster._core.launcher.base import CheckRunHealthResult, WorkerStatus
from dagster._core.launcher.default_run_launcher import DefaultRunLauncher
from dagster._core.storage.dagster_run import DagsterRun

HOST_TAG, PID_TAG = "envduels/worker_host", "envduels/worker_pid"
SEEN_KEY = "envduels/machine_seen/"  # + hostname: epoch seconds this machine's launcher last reported itself alive
MACHINE_SILENT_S = 120.0
PID_REUSE_SLACK_S = 2.0  # /proc start times are in clock ticks; the run starts after its process does


def worker_tags() -> dict[str, str]:
    """Tags naming this process as the worker of a run it executes itself (``materialize``, ``execute_in_process``)."""
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid())}


def process_started_at(pid: int) -> float | None:
    """Epoch seconds at which process ``pid`` started; None when it does not exist or is a zombie (Linux /proc)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
        with open("/proc/stat") as fh:
            boot = next(float(line.split()[1]) for line in fh if line.startswith("btime "))
    except (OSError, StopIteration, ValueError):
        return None if not _exists(pid) else 0.0
    fields = stat.rsplit(")", 1)[1].split()  # the name in parentheses may hold spaces
    if fields[0] in ("Z", "X"):  # dead, not yet reaped by its parent
        return None
    return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def worker_status(pid: int, run_started: float | None) -> CheckRunHealthResult:
    """Whether process ``pid`` on this machine is still the worker of a run that started at ``run_started``."""
    started = process_started_at(pid)
    if started is None:
        return CheckRunHealthResult(WorkerStatus.FAILED, f"the run's process (pid {pid}) is gone: it was killed "
                                    "or crashed without reporting; its slot in the run queue is freed")
    if run_started is not None and started > run_started + PID_REUSE_SLACK_S:
        return CheckRunHealthResult(WorkerStatus.FAILED, f"the run's process (pid {pid}) is gone: that pid now "
                                    f"belongs to a process started {started - run_started:.0f} s after the run")
    return CheckRunHealthResult(WorkerStatus.RUNNING, f"pid {pid} is alive")


class WorkerCheckingRunLauncher(DefaultRunLauncher):
    """``DefaultRunLauncher`` plus ``check_run_worker_health`` for workers on this machine (module docstring)."""

    def __init__(self, inst_data=None, machine_silent_seconds: float = MACHINE_SILENT_S):
        super().__init__(inst_data=inst_data)
        self.machine_silent_seconds = float(machine_silent_seconds)

    @classmethod
    def config_type(cls):
        from dagster import Field

        return {"machine_silent_seconds": Field(float, is_required=False, default_value=MACHINE_SILENT_S,
                                                description="fail another machine's runs after it has been "
                                                            "silent this long (module docstring)")}

    @classmethod
    def from_config_value(cls, inst_data, config_value):
        return cls(inst_data=inst_data, **config_value)

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def launch_run(self, context) -> None:
        # The worker runs on a code server this process started, so on this machine: record which one.
        self._instance.add_run_tags(context.dagster_run.run_id, {HOST_TAG: socket.gethostname()})
        super().launch_run(context)

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        pid = self._local_pid(run)
        record = self._instance.get_run_record_by_id(run.run_id)
        started = record.start_time if record is not None else None
        if pid is None:
            return self._remote_health(run, started)
        self._report_alive()
        return worker_status(pid, started if started is not None else time.time())

    def _report_alive(self) -> None:
        self._instance.run_storage.set_cursor_values({SEEN_KEY + socket.gethostname(): repr(time.time())})

    def _remote_health(self, run: DagsterRun, started: float | None) -> CheckRunHealthResult:
        """Another machine's run: failed only when that machine said it was alive and has since been silent."""
        host = run.tags.get(HOST_TAG)
        if host and host != socket.gethostname():
            seen = self._instance.run_storage.get_cursor_values({SEEN_KEY + host}).get(SEEN_KEY + host)
            try:
                last = max(float(seen), started or 0.0) if seen else None
            except ValueError:
                last = None
            if last is not None and time.time() - last > self.machine_silent_seconds:
                return CheckRunHealthResult(
                    WorkerStatus.FAILED, f"machine {host!r}, which ran this run's worker, has not reported itself "
                    f"alive for {time.time() - last:.0f} s (more than {self.machine_silent_seconds:.0f} s): it is "
                    "taken for dead with its workers (run_launcher.machine_silent_seconds in dagster.yaml)")
        return CheckRunHealthResult(WorkerStatus.RUNNING, "worker not checkable from this machine")

    def _local_pid(self, run: DagsterRun) -> int | None:
        """The worker's pid when the worker runs on this machine; None when it cannot be checked from here."""
        if run.tags.get(HOST_TAG) != socket.gethostname():  # another machine's pid, or no machine recorded
            return None
        if PID_TAG in run.tags:
            return int(run.tags[PID_TAG]) if run.tags[PID_TAG].isdigit() else None
        if not self._local_code_server(run):
            return None
        from dagster._core.events import DagsterEventType

        records = self._instance.get_records_for_run(run.run_id, of_type=DagsterEventType.ENGINE_EVENT).records
        for rec in reversed(records):
            entry = rec.event_log_entry
            text = entry.user_message or (entry.dagster_event.message if entry.dagster_event else None) or ""
            if text.startswith("Started process for run (pid: "):
                digits = text.split("pid: ", 1)[1].split(")", 1)[0]
                return int(digits) if digits.isdigit() else None
        return None

    @staticmethod
    def _local_code_server(run: DagsterRun) -> bool:
        """The run's code server was started by this machine's webserver/daemon (not a remote gRPC server)."""
        from dagster._core.remote_origin import ManagedGrpcPythonEnvCodeLocationOrigin

        origin = run.remote_job_origin
        if origin is None:
            return False
        return isinstance(origin.repository_origin.code_location_origin, ManagedGrpcPythonEnvCodeLocationOrigin)
