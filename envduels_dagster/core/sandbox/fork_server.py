"""The default launcher: workers forked from a long-lived, preloaded template process.

Why: a confined worker forked from an interpreter that has the standard library
loaded starts in ~10 ms instead of ~80-100 ms for a fresh interpreter. The fork
server is trusted (root, host namespaces) and never sees environment source: the
parent passes it only the child's pipe ends over a unix socket (SCM_RIGHTS); the child
confines itself like any worker. Its state lives in a ``ForkServerPool`` (the serving
server and the retired ones still serving their workers), one per orchestrator process.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import signal
import socket
import subprocess
import sys
import threading

from envduels_dagster.core.sandbox.launchers import WORKER_SCRIPT, Launcher, get_launcher
from envduels_dagster.core.sandbox.limits import SandboxError, SandboxLimits


class ForkedProcess:
    """A worker forked by the fork server; the parent holds a pidfd to kill it race-free."""

    def __init__(self, status: socket.socket):
        self.status = status
        self.pid: int | None = None
        self.pidfd: int | None = None
        self.result: tuple[int | None, float | None] | None = None
        self._started = asyncio.Event()
        self._done = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        status.setblocking(False)
        self._loop.add_reader(status.fileno(), self._on_status)

    def _on_status(self) -> None:
        while True:
            try:
                msg, fds, _, _ = socket.recv_fds(self.status, 256, 1)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                msg, fds = b"", []
            if msg.startswith(b"P ") and fds and self.pidfd is None:
                self.pid, self.pidfd = int(msg.split()[1]), fds[0]
                self._started.set()
                continue
            for fd in fds:
                os.close(fd)
            if msg.startswith(b"X "):
                _, wstatus, cpu, _ = msg.decode().split()
                self.result = (os.waitstatus_to_exitcode(int(wstatus)), float(cpu))
                continue
            if not msg:  # end of file: reaped (after X) or the fork server died
                self._loop.remove_reader(self.status.fileno())
                if self.result is None:
                    self.kill()  # if it still runs, it must not outlive its fork server
                    self.result = (None, None)
                self._started.set()
                self._done.set()
                return

    @property
    def exited(self) -> bool:
        return self._done.is_set()

    def kill(self) -> None:
        if self.pidfd is not None and not self._done.is_set():
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except OSError:
                pass

    async def wait(self, timeout: float) -> tuple[int | None, float | None]:
        try:
            await asyncio.wait_for(self._done.wait(), timeout)
        except TimeoutError:
            return None, None
        return self.result or (None, None)

    def release(self) -> None:
        if self.status.fileno() >= 0:
            self._loop.remove_reader(self.status.fileno())
            self.status.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class ForkServer:
    """One template process and the control socket to it."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", str(WORKER_SCRIPT), "--fork-server", str(theirs.fileno())],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, env={}, cwd="/",
                # Its own session: a signal to the orchestrator's process group (Ctrl-C, a
                # supervisor's SIGKILL) must leave it alive long enough to see the control
                # socket close, kill its workers and remove their working directories.
                start_new_session=True,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.settimeout(5.0)
        self.sock = ours
        self.owner = os.getpid()

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.proc.poll() is None

    def send(self, fds: list[int], workdir: str) -> None:
        socket.send_fds(self.sock, [b"spawn " + os.fsencode(workdir)], fds)

    def close(self) -> None:
        self.sock.close()  # the fork server kills its children and exits on end of file
        if self.owner != os.getpid():
            return
        try:
            self.proc.wait(2.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class ForkServerPool:
    """The fork server this process forks workers from, and the retired ones.

    A slow (not dead) server is retired, not killed: it would take every live worker
    of other environments down with it. A forked orchestrator (multiprocessing) forgets
    its parent's servers -- its copies of their sockets would keep them alive after the
    parent exits -- and starts its own when needed."""

    def __init__(self) -> None:
        self.current: ForkServer | None = None
        self.retired: list[ForkServer] = []
        self.lock = threading.Lock()
        self._hooked = False

    def _hook_once(self) -> None:
        # Registered on first use, not at import: importing the package changes nothing.
        if not self._hooked:
            self._hooked = True
            os.register_at_fork(after_in_child=self._forget_after_fork)
            atexit.register(self.shutdown)

    def _retire_locked(self) -> None:
        if self.current is not None:
            if self.current.alive():
                self.retired.append(self.current)
            else:
                self.current.close()
            self.current = None
        for server in [s for s in self.retired if not s.alive()]:
            self.retired.remove(server)
            server.close()

    def send(self, fds: list[int], workdir: str) -> None:
        with self.lock:
            self._hook_once()
            for attempt in (1, 2):
                if self.current is None or not self.current.alive():
                    self._retire_locked()
                    self.current = ForkServer()
                try:
                    self.current.send(fds, workdir)
                    return
                except OSError:  # dead (EPIPE) or not reading (timeout)
                    self._retire_locked()
                    if attempt == 2:
                        raise

    def discard(self) -> None:
        with self.lock:
            self._retire_locked()

    def pid(self) -> int | None:
        server = self.current
        return server.proc.pid if server is not None and server.alive() else None

    def shutdown(self) -> None:
        with self.lock:
            for server in [self.current, *self.retired]:
                if server is not None:
                    server.close()
            self.current = None
            self.retired.clear()

    def _forget_after_fork(self) -> None:
        self.lock = threading.Lock()
        for server in [self.current, *self.retired]:
            if server is not None:
                server.sock.close()
        self.current = None
        self.retired.clear()


class ForkServerLauncher(Launcher):
    """Forks workers from ``pool``; falls back to a fresh interpreter when no fork server can be had."""

    def __init__(self) -> None:
        self.pool = ForkServerPool()

    async def spawn(self, req_r: int, rep_w: int, workdir: str, limits: SandboxLimits):  # type: ignore[override]
        try:
            return await self.fork(req_r, rep_w, workdir, limits.load_timeout_s)
        except SandboxError as exc:
            if exc.kind != "sandbox_unavailable":
                raise
            # It cannot start, or dies at once: the same confinement, only slower.
            return await get_launcher("exec").spawn(req_r, rep_w, workdir, limits)

    async def fork(self, req_r: int, rep_w: int, workdir: str, timeout: float) -> ForkedProcess:
        for _attempt in (1, 2):
            status, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                self.pool.send([req_r, rep_w, theirs.fileno()], workdir)
            except OSError as exc:
                status.close()
                raise SandboxError("sandbox_unavailable", f"cannot reach the fork server: {exc}") from None
            finally:
                theirs.close()
            handle = ForkedProcess(status)
            try:
                await asyncio.wait_for(handle._started.wait(), timeout)
            except TimeoutError:
                handle.release()
                self.pool.discard()  # too slow: the next worker gets a fresh one
                raise SandboxError("timeout", f"the fork server did not start a worker within {timeout:g} s") from None
            if handle.pid is not None:
                return handle
            handle.release()  # it died before forking ours: start a fresh one and try again
            self.pool.discard()
        raise SandboxError("sandbox_unavailable", "the fork server died twice before starting a worker")
