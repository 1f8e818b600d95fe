"""Runs spread over several machines' code servers, and a killed machine's run finishes on another (issue 46).

Dagster runs one daemon per instance; ``WorkerPoolRunLauncher`` (envduels_dagster/instance/run_launcher.py) starts each run
on one of several code servers (one per machine) through its gRPC ``StartRun`` and asks that server whether it still
runs it. Here the machines are two real ``dagster api grpc`` servers on 127.0.0.1 (ports from the OS) and the real
``dagster-daemon`` with run monitoring and ``run_retries``; one server is SIGKILLed with its run processes in the
middle of a run, as a killed container would be. deploy/cluster-check runs the same with two containers that have
their own hostnames and the project's code location.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from envduels_dagster.instance.run_launcher import HOST_TAG, SEEN_KEY, WorkerPoolRunLauncher
from tests.helpers.daemon import BIN, REPO, free_port, wait_for

FIXTURE = REPO / "tests" / "fixtures" / "pool"


class CodeServer:
    """``dagster api grpc`` serving the fixture location on 127.0.0.1, in its own process group (a 'machine')."""

    def __init__(self, env: dict[str, str], log: Path, port: int):
        self.port = port
        self._out = open(log, "w")
        self.log = log
        self.proc = subprocess.Popen([str(BIN / "dagster"), "api", "grpc", "-f", str(FIXTURE / "location.py"),
                                      "-h", "127.0.0.1", "-p", str(self.port)], cwd=FIXTURE, env=env,
                                     stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout_s: float = 120) -> None:
        from dagster._core.errors import DagsterUserCodeUnreachableError
        from dagster._grpc.client import DagsterGrpcClient

        def up():
            if self.proc.poll() is not None:
                raise AssertionError(f"code server exited: {self.log.read_text()[-2000:]}")
            try:
                DagsterGrpcClient(host="127.0.0.1", port=self.port).ping("up")
                return True
            except DagsterUserCodeUnreachableError:
                return False

        wait_for(up, timeout_s, f"code server on port {self.port} ({self.log})")

    def kill(self) -> None:
        """The machine dies: the server and every run process it started, with no chance to report."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        self._out.close()


def _pool_yaml(home: Path, workers: dict[str, int], silent_s: float) -> None:
    """The project's dagster.yaml with the pool launcher, fast run monitoring and one automatic retry."""
    config = yaml.safe_load((REPO / "dagster.yaml").read_text())
    config["run_launcher"] = {"module": "envduels_dagster.instance.run_launcher", "class": "WorkerPoolRunLauncher",
                              "config": {"machine_silent_seconds": silent_s, "grpc_timeout_seconds": 2.0,
                                         "workers": [{"name": n, "host": "127.0.0.1", "port": p}
                                                     for n, p in workers.items()]}}
    # A run whose machine dies while it is STARTING (before its process reported RUN_START) is Dagster's to fail,
    # after start_timeout_seconds (the launcher is not asked); 180 s in the project's file, 30 s here.
    config["run_monitoring"].update(poll_interval_seconds=1, start_timeout_seconds=30)
    config["run_retries"] = {"enabled": True, "max_retries": 1}
    config["concurrency"]["runs"]["max_concurrent_runs"] = 4
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))


@pytest.fixture
def pool_env(tmp_path):
    home = tmp_path / "dagster"
    home.mkdir()
    registry = tmp_path / "models.yaml"
    shutil.copy(REPO / "models.yaml", registry)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVDUELS_", "DAGSTER_"))}
    env.update(DAGSTER_HOME=str(home), ENVDUELS_HOME=str(tmp_path / "data"), ENVDUELS_REGISTRY=str(registry),
               PYTHONPATH=os.pathsep.join([str(FIXTURE), str(REPO)]), PATH=f"{BIN}{os.pathsep}{env['PATH']}",
               POOL_OUT=str(tmp_path / "done.txt"), POOL_STEP_S="8")
    old = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(home)
    yield env, tmp_path
    if old is None:
        os.environ.pop("DAGSTER_HOME", None)
    else:
        os.environ["DAGSTER_HOME"] = old


@pytest.mark.slow
def test_one_daemons_runs_spread_over_two_machines_and_a_killed_machines_run_finishes_on_the_other(pool_env):
    import dagster as dg

    env, tmp = pool_env
    ports = {name: free_port() for name in ("machine-a", "machine-b")}
    _pool_yaml(Path(env["DAGSTER_HOME"]), ports, silent_s=3.0)
    with dg.DagsterInstance.get():  # the instance's tables, before two servers race to create them
        pass
    servers = {name: CodeServer(env, tmp / f"{name}.log", port) for name, port in ports.items()}
    # the daemon loads the location (its sensor) from machine-a's server, as it would run beside it
    (tmp / "workspace.yaml").write_text(yaml.safe_dump({"load_from": [{"grpc_server": {
        "host": "127.0.0.1", "port": ports["machine-a"], "location_name": "pool"}}]}))
    daemon = None
    try:
        for server in servers.values():
            server.wait_ready()
        daemon_log = tmp / "daemon.log"
        daemon = subprocess.Popen([str(BIN / "dagster-daemon"), "run", "-w", str(tmp / "workspace.yaml")], cwd=tmp,
                                  env=env, stdout=open(daemon_log, "w"), stderr=subprocess.STDOUT,
                                  start_new_session=True)
        with dg.DagsterInstance.get() as instance:
            def runs():
                return [r.dagster_run for r in instance.get_run_records()]

            def started_on_both():
                live = [r for r in runs() if r.status == dg.DagsterRunStatus.STARTED]
                return live if {r.tags.get(HOST_TAG) for r in live} == set(servers) else None

            first = wait_for(started_on_both, 180, f"runs STARTED on both machines (daemon log {daemon_log})")
            on_b = {r.run_id: r for r in first if r.tags[HOST_TAG] == "machine-b"}

            def step_running_on_b():
                notes = (tmp / "done.txt").read_text().split() if (tmp / "done.txt").exists() else []
                return next((on_b[i] for i in on_b if i in notes), None)

            victim = wait_for(step_running_on_b, 60, "a step started on machine-b", poll=0.2)
            servers["machine-b"].kill()  # in the middle of its run's step (each step takes 8 s)
            t_kill = time.monotonic()

            def settled():
                every = runs()
                ok = {r.tags.get("dagster/partition") for r in every if r.status == dg.DagsterRunStatus.SUCCESS}
                active = [r for r in every if not r.is_finished]
                return every if ok == {"p0", "p1", "p2", "p3"} and not active else None

            every = wait_for(settled, 240, f"every partition succeeded (daemon log {daemon_log})")
            print(f"killed machine-b; all four partitions done {time.monotonic() - t_kill:.0f} s later")
    finally:
        if daemon is not None:
            os.killpg(daemon.pid, signal.SIGTERM)
            daemon.wait(60)
        for server in servers.values():
            server.kill()

    by_id = {r.run_id: r for r in every}
    killed = by_id[victim.run_id]
    assert killed.status == dg.DagsterRunStatus.FAILURE
    with dg.DagsterInstance.get() as instance:
        messages = " | ".join(e.user_message + ((e.dagster_event.message or "") if e.dagster_event else "")
                              for e in instance.all_logs(victim.run_id))
    assert "worker machine-b (127.0.0.1:" in messages and "has not answered for" in messages, messages[-1500:]
    retry = [r for r in every if r.parent_run_id == victim.run_id]
    assert len(retry) == 1 and retry[0].status == dg.DagsterRunStatus.SUCCESS
    assert retry[0].tags[HOST_TAG] == "machine-a"  # machine-b does not answer: the retry went to the survivor
    assert retry[0].tags["dagster/partition"] == victim.tags["dagster/partition"]

    # Where each step really ran (the port of the server that started its process, written by the step itself)
    # agrees with the launcher's tag: both machines ran steps; each partition finished exactly once, and the killed
    # run started its step on machine-b and never finished it.
    notes = [line.split() for line in (tmp / "done.txt").read_text().splitlines()]
    for _, _, run_id, port in notes:
        assert int(port) == ports[by_id[run_id].tags[HOST_TAG]]
    assert {by_id[run_id].tags[HOST_TAG] for what, _, run_id, _ in notes if what == "start"} == set(servers)
    assert sorted(p for what, p, _, _ in notes if what == "done") == ["p0", "p1", "p2", "p3"], notes
    assert [what for what, _, run_id, _ in notes if run_id == victim.run_id] == ["start"]


def test_the_worker_list_is_checked_when_the_instance_loads(tmp_path):
    import dagster as dg

    def load(workers_yaml: str) -> str:
        (tmp_path / "dagster.yaml").write_text(
            "run_launcher:\n  module: envduels_dagster.instance.run_launcher\n  class: WorkerPoolRunLauncher\n"
            f"  config:\n    workers: {workers_yaml}\n")
        with pytest.raises(Exception) as err, dg.DagsterInstance.from_config(str(tmp_path)) as inst:
            inst.run_launcher  # noqa: B018 (loading it is the check)
        return str(err.value)

    assert "names no code server" in load("[]")
    assert "worker names repeat" in load("[{name: a, host: h1, port: 1}, {name: a, host: h2, port: 2}]")
    (tmp_path / "dagster.yaml").write_text(
        "run_launcher:\n  module: envduels_dagster.instance.run_launcher\n  class: WorkerPoolRunLauncher\n"
        "  config:\n    machine_silent_seconds: 30\n    workers:\n      - {name: a, host: 127.0.0.1, port: 4001}\n")
    with dg.DagsterInstance.from_config(str(tmp_path)) as inst:
        assert [w.address for w in inst.run_launcher.workers] == ["127.0.0.1:4001"]
        assert inst.run_launcher.machine_silent_seconds == 30.0


def test_no_worker_answering_starts_nothing_and_says_which_workers_were_asked():
    import dagster as dg
    from dagster._core.errors import DagsterUserCodeUnreachableError
    from dagster._core.launcher.base import LaunchRunContext
    from dagster._core.storage.dagster_run import DagsterRun

    dead = [free_port(), free_port()]  # nothing listens there
    with dg.DagsterInstance.ephemeral() as instance:
        launcher = WorkerPoolRunLauncher(workers=[{"name": f"m{i}", "host": "127.0.0.1", "port": p}
                                                  for i, p in enumerate(dead)], grpc_timeout_seconds=1)
        launcher.register_instance(instance)
        run = instance.add_run(DagsterRun(job_name="parts_job"))
        with pytest.raises(DagsterUserCodeUnreachableError) as err:
            launcher.launch_run(LaunchRunContext(dagster_run=run, workspace=None))
        msg = str(err.value)
        assert "no run worker answered, so the run was not started" in msg
        assert f"m0 (127.0.0.1:{dead[0]})" in msg and f"m1 (127.0.0.1:{dead[1]})" in msg
        assert "run_launcher.config.workers" in msg
        after = instance.get_run_by_id(run.run_id)
        assert HOST_TAG not in after.tags and after.status == dg.DagsterRunStatus.NOT_STARTED  # nothing half-done
        assert launcher._launching == {"m0": 0, "m1": 0}  # no launch slot left reserved
        assert not instance.run_storage.get_cursor_values({SEEN_KEY + "m0"})
