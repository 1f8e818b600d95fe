"""``envduels ui``: ``dagster dev`` on the project's instance, stopped with every process it started.

Why a supervisor and not ``subprocess.call``: ``dagster dev`` starts a webserver, a daemon and code servers,
and the daemon launches runs; after Ctrl-C some of them kept running (issue 43) and had to be killed by hand.
Here ``dagster dev`` leads a session of its own; Ctrl-C or SIGTERM is passed on to it, it gets ``grace_s``
to shut down cleanly, and then whatever is left of its process tree (its session, and descendants that left
it, found through /proc) is killed. The address is printed once the port is known (port 0 picks a free one).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def descendants(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (Linux /proc; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = entry.read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2:].split()  # after the command name, which may hold spaces
        children.setdefault(int(fields[1]), []).append(int(entry.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _kill(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2:][:1] != "Z":  # a zombie has exited; its parent just has not reaped it
            alive.add(pid)
    return alive


def stop_tree(proc: subprocess.Popen, sig: int = signal.SIGTERM, grace_s: float = 20.0) -> None:
    """Ask ``proc`` (a session leader) to stop with ``sig``; after ``grace_s`` kill what is left of its tree."""
    tree = descendants(proc.pid)
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        tree |= descendants(proc.pid)
        if proc.poll() is not None and not _alive(tree):
            return
        time.sleep(0.2)
    tree |= descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _kill(_alive(tree), signal.SIGKILL)
    proc.wait(timeout=10)


def run_ui(cmd_for_port, host: str, port: int, cwd: Path, grace_s: float = 20.0) -> int:
    """Run ``cmd_for_port(port)`` until it exits, or until SIGINT/SIGTERM stops it and its process tree.
    Returns its exit code, or 130 (SIGINT) / 143 (SIGTERM) when stopped."""
    port = port or free_port(host)
    cmd = cmd_for_port(port)
    received: list[int] = []

    def on_signal(signum, _frame):
        received.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, start_new_session=True)
        print(f"Dagster UI: http://{host}:{port} (pid {proc.pid}; Ctrl-C stops it and every process it started)",
              flush=True)
        while proc.poll() is None and not received:
            time.sleep(0.2)
        if received:
            print("stopping the Dagster UI and the processes it started ...", file=sys.stderr, flush=True)
            stop_tree(proc, signal.SIGTERM, grace_s)
            return 128 + received[0]
        stop_tree(proc, signal.SIGTERM, 2.0)  # it exited by itself: leave no child behind either
        return int(proc.returncode or 0)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def open_ui(host: str, port: int) -> int:
    """``dagster dev`` on the instance until Ctrl-C/SIGTERM, which stop its whole process tree (``run_ui``)."""
    from envduels_dagster.core.storage.project_files import project_file
    from envduels_dagster.instance.home import prepare_instance_home

    project = project_file(".")  # the checkout, or the project files an installed wheel carries
    prepare_instance_home()
    dagster = Path(sys.executable).with_name("dagster")

    def cmd(p: int) -> list[str]:
        return [str(dagster), "dev", "-w", str(project / "workspace.yaml"), "-h", host, "-p", str(p)]

    print("Starting:", " ".join(cmd(port)), f"(DAGSTER_HOME={os.environ['DAGSTER_HOME']})", flush=True)
    return run_ui(cmd, host, port, project)
