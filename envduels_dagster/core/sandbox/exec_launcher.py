"""Launchers that start a fresh interpreter per worker: bare, or inside bubblewrap.

Why keep the slow path: it needs no long-lived template process, so it is the
fallback when no fork server can be had, and bubblewrap (its own pid namespace, a
filesystem holding only the interpreter) can only wrap a freshly executed program.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
from pathlib import Path

from envduels_dagster.core.sandbox.launchers import WORKER_SCRIPT, Launcher
from envduels_dagster.core.sandbox.limits import SandboxError, SandboxLimits

BWRAP_MISSING = "wrapper 'bwrap' is not installed (Debian: apt-get install -y bubblewrap)"


class ExecProcess:
    """A worker that is its own freshly started interpreter (optionally inside bubblewrap)."""

    def __init__(self, proc: asyncio.subprocess.Process, wrapped: bool):
        self.proc = proc
        self.pid: int | None = proc.pid
        self.wrapped = wrapped

    @property
    def exited(self) -> bool:
        return self.proc.returncode is not None

    def kill(self) -> None:
        if self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    async def wait(self, timeout: float) -> tuple[int | None, float | None]:
        try:
            code = await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            return None, None
        if self.wrapped and code > 128:  # bubblewrap reports a signal death as 128 + signal
            code = -(code - 128)
        return code, None

    def release(self) -> None:
        pass


async def start_interpreter(argv: list[str], req_r: int, rep_w: int, workdir: str, wrapped: bool) -> ExecProcess:
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=req_r,
            stdout=rep_w,
            stderr=asyncio.subprocess.DEVNULL,
            env={},  # no inherited secrets
            cwd=workdir,
            start_new_session=True,  # own process group, killed as a whole
        )
    except OSError as exc:
        raise SandboxError("sandbox_unavailable", f"cannot start the worker: {exc}") from None
    return ExecProcess(proc, wrapped)


class ExecLauncher(Launcher):
    """``python -I -S -B worker.py``: request pipe on stdin, reply pipe on stdout."""

    async def spawn(self, req_r: int, rep_w: int, workdir: str, limits: SandboxLimits) -> ExecProcess:
        argv = [sys.executable, "-I", "-S", "-B", str(WORKER_SCRIPT)]
        return await start_interpreter(argv, req_r, rep_w, workdir, wrapped=False)


class BwrapLauncher(Launcher):
    """The same worker inside bubblewrap's pid, network, IPC, UTS and cgroup namespaces."""

    def unavailable(self) -> str | None:
        return None if shutil.which("bwrap") else BWRAP_MISSING

    async def spawn(self, req_r: int, rep_w: int, workdir: str, limits: SandboxLimits) -> ExecProcess:
        argv = bwrap_argv(workdir) + [os.path.realpath(sys.executable), "-I", "-S", "-B", str(WORKER_SCRIPT)]
        return await start_interpreter(argv, req_r, rep_w, workdir, wrapped=True)


def bwrap_argv(workdir: str) -> list[str]:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxError("sandbox_unavailable", BWRAP_MISSING)
    prefix = os.path.realpath(sys.base_prefix)
    argv = [bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    worker_dir = str(WORKER_SCRIPT.parent)
    # bubblewrap copies the modes of the directories it creates on the way to a bind
    # (/root is 0700): make them traversable for the throwaway uid.
    argv += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for bound in ([prefix] if not prefix.startswith("/usr/") else []) + [worker_dir, workdir]:
        for parent in reversed(Path(bound).parents):
            if str(parent) not in ("/", "/usr", "/tmp"):
                argv += ["--perms", "0755", "--dir", str(parent)]
    if not prefix.startswith("/usr/"):
        argv += ["--ro-bind", prefix, prefix]
    argv += ["--ro-bind", worker_dir, worker_dir, "--bind", workdir, workdir, "--chdir", workdir]
    if os.getuid() == 0:  # the worker drops to its throwaway uid inside
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    return argv + ["--"]
