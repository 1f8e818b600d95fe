"""Run untrusted environment code in a confined worker process (DESIGN §3).

Why a process per environment instance: model-written code must never share
memory, file descriptors or secrets with the orchestrator, and a runaway
environment must be killable without killing the run. The worker confines
itself (network, IPC and mount namespaces, unprivileged uid, rlimits, seccomp)
before it sees the code; this side enforces wall-clock deadlines, kills the
worker, and re-checks every reply, because the code that writes replies shares
its process with the environment and could be subverted by it.

Workers are forked from a long-lived template process (the fork server,
``SandboxLimits.fork_server``) that has the interpreter and the curated standard
library loaded already: a confined worker then starts in a few milliseconds
instead of paying an interpreter start each time. ``SandboxLimits(wrapper="bwrap")``
instead starts each worker inside bubblewrap for a stronger, slower layer.
docs/THREAT-MODEL.md says what each layer stops and what it does not.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import math
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

WORKER_SCRIPT = Path(__file__).with_name("sandbox_worker.py")
# Each worker runs under its own throwaway uid so that one environment cannot
# signal or read another's processes; root may setuid to ids with no passwd entry.
# Drawn at random from ~2**31 ids: a per-process counter offset by pid % 1000 gave two
# orchestrator processes whose pids agree mod 1000 (parallel Dagster runs) the same uids.
_UID_BASE = 200_000
_UID_SPAN = 2**31 - _UID_BASE

ERROR_KINDS = ("load_error", "timeout", "crash", "protocol_violation", "resource_limit", "sandbox_unavailable")
# What a worker may report about itself; timeouts and unavailability are the parent's to decide.
_WORKER_KINDS = ("load_error", "crash", "protocol_violation", "resource_limit")
WRAPPERS = (None, "bwrap")
MAX_MESSAGE_CHARS = 2000
MAX_INFO_DEPTH = 32
MAX_REFERENCE_ACTIONS = 10_000


@dataclass(frozen=True)
class SandboxLimits:
    """Limits applied to every worker. Defaults suit the text games we run.

    ``isolate_network``, ``isolate_filesystem`` and ``drop_privileges`` fail closed: when
    the machine cannot provide them the sandbox refuses to start (``sandbox_unavailable``)
    unless they are turned off knowingly. ``fork_server`` only changes how fast a worker
    starts, not what confines it. ``wrapper="bwrap"`` runs each worker inside bubblewrap
    (``apt-get install -y bubblewrap``): its own pid namespace and a filesystem holding
    only the interpreter, at the price of a full interpreter start per worker.
    """

    step_timeout_s: float = 5.0
    load_timeout_s: float = 10.0
    cpu_seconds: int = 20
    memory_mb: int = 512
    max_open_files: int = 64
    max_file_size_mb: int = 1
    max_observation_chars: int = 20_000
    max_reply_bytes: int = 4 * 1024 * 1024
    isolate_network: bool = True
    drop_privileges: bool = True
    isolate_filesystem: bool = True  # read-only view of the host, private tmpfs workdir of workdir_mb
    workdir_mb: int = 16
    seccomp: bool = True
    fork_server: bool = True
    wrapper: str | None = None

    def __post_init__(self) -> None:
        if self.wrapper not in WRAPPERS:
            raise ValueError(f"unknown sandbox wrapper {self.wrapper!r}; choose one of {WRAPPERS}")


class SandboxError(Exception):
    """A failure of the environment inside the sandbox, classified by ``kind``."""

    def __init__(self, kind: str, message: str):
        assert kind in ERROR_KINDS, kind
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


# --------------------------------------------------------------------------- reply checks
# The worker checks results too (with friendlier messages), but environment code runs in
# the worker's process and can patch those checks or write lines of its own: these are
# the ones that count. A reply that passes them carries nothing the environment could
# not have returned honestly.


def _text_problem(value: Any, what: str, limit: int) -> str | None:
    if not isinstance(value, str):
        return f"{what} is a {type(value).__name__}, not a string"
    if len(value) > limit:
        return f"{what} has {len(value)} chars; limit is {limit}"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return f"{what} is not valid Unicode"
    return None


def _json_depth(value: Any, limit: int) -> int:
    # Deliberately the same as sandbox_worker._depth: the worker is a stdlib-only script that
    # cannot import this package, and the parent re-checks every reply independently anyway.
    stack, deepest = [(value, 1)], 0
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            if level > limit:
                return level
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def _info_problem(info: Any) -> str | None:
    if not isinstance(info, dict):
        return f"info is a {type(info).__name__}, not a dict"
    if _json_depth(info, MAX_INFO_DEPTH) > MAX_INFO_DEPTH:
        return f"info is nested deeper than {MAX_INFO_DEPTH} levels"
    return None


def _check_hello(r: dict, lim: SandboxLimits) -> str | None:
    if not isinstance(r.get("network_isolated"), bool) or not isinstance(r.get("pid"), int):
        return "the worker's greeting lacks its isolation report"
    return None


def _check_load(r: dict, lim: SandboxLimits) -> str | None:
    return None if isinstance(r.get("has_reference"), bool) else "has_reference is not a bool"


def _check_reset(r: dict, lim: SandboxLimits) -> str | None:
    observation = _text_problem(r.get("observation"), "the observation", lim.max_observation_chars)
    return observation or _info_problem(r.get("info"))


def _check_step(r: dict, lim: SandboxLimits) -> str | None:
    problem = _check_reset(r, lim)
    if problem:
        return problem
    reward = r.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        return f"the reward is a {type(reward).__name__}, not a number"
    try:
        finite = math.isfinite(reward)
    except OverflowError:  # a huge integer literal in a forged line
        return "the reward is too large for a float"
    if not finite:
        return f"the reward is not finite ({reward})"
    for name in ("terminated", "truncated"):
        if not isinstance(r.get(name), bool):
            return f"{name} is not a bool"
    return None


def _check_reference(r: dict, lim: SandboxLimits) -> str | None:
    actions = r.get("actions")
    if actions is None:
        return None
    if not isinstance(actions, list):
        return f"the actions are a {type(actions).__name__}, not a list"
    if len(actions) > MAX_REFERENCE_ACTIONS:
        return f"more than {MAX_REFERENCE_ACTIONS} reference actions"
    for action in actions:
        problem = _text_problem(action, "a reference action", lim.max_observation_chars)
        if problem:
            return problem
    return None


def _check_ok(r: dict, lim: SandboxLimits) -> str | None:
    return None


def _clean_message(message: str) -> str:
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + f"... [{len(message) - MAX_MESSAGE_CHARS} more chars]"
    return message.encode("utf-8", "replace").decode("utf-8")


# --------------------------------------------------------------------------- the channel


class _Overflow(Exception):
    pass


class _Channel(asyncio.Protocol):
    """The reply pipe (read side, as an asyncio protocol) and the request pipe (write side).

    Exactly one reply line is expected per request; bytes that arrive otherwise are kept
    so that the next request can refuse to go on over a channel that is out of step.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.buf = bytearray()
        self.lines: deque[bytes] = deque()
        self.eof = False
        self.overflow = False
        self.waiter: asyncio.Future | None = None
        self.rtransport: asyncio.ReadTransport | None = None
        self.wtransport: asyncio.WriteTransport | None = None

    @classmethod
    async def open(cls, req_w: int, rep_r: int, limit: int) -> "_Channel":
        loop = asyncio.get_running_loop()
        chan = cls(limit)
        try:
            chan.wtransport, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(req_w, "wb", buffering=0))
        except BaseException:
            os.close(rep_r)
            raise
        try:
            await loop.connect_read_pipe(lambda: chan, os.fdopen(rep_r, "rb", buffering=0))
        except BaseException:
            chan.close()
            raise
        return chan

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.rtransport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if b"\n" in data:
            *complete, rest = self.buf.split(b"\n")
            self.lines.extend(bytes(line) for line in complete)
            self.buf = bytearray(rest)
            if any(len(line) > self.limit for line in complete):
                self.overflow = True
        if len(self.buf) > self.limit:
            self.overflow = True
        if self.overflow and self.rtransport is not None:
            self.rtransport.pause_reading()  # buffer no more of it: the worker is killed
        self._wake()

    def eof_received(self) -> bool | None:
        self.eof = True
        self._wake()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self._wake()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(True)

    # used by SandboxedEnv
    def stray_bytes(self) -> int:
        return sum(len(line) + 1 for line in self.lines) + len(self.buf)

    def write(self, data: bytes) -> bool:
        if self.wtransport is None or self.wtransport.is_closing():
            return False
        self.wtransport.write(data)
        return True

    async def read_line(self, deadline: float) -> bytes | None:
        """The next line, or None at end of file. Raises TimeoutError or _Overflow."""
        loop = asyncio.get_running_loop()
        while not self.lines:
            if self.overflow:
                raise _Overflow
            if self.eof:
                return None
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise asyncio.TimeoutError
            fut = self.waiter = loop.create_future()
            timer = loop.call_later(remaining, _expire, fut)
            try:
                await fut
            finally:
                timer.cancel()
                self.waiter = None
        if self.overflow:
            raise _Overflow
        return self.lines.popleft()

    def close(self) -> None:
        for transport in (self.wtransport, self.rtransport):
            if transport is not None:
                transport.close()
        self.wtransport = self.rtransport = None


def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(False)


# --------------------------------------------------------------------------- worker processes


class _ExecProcess:
    """A worker that is its own freshly started interpreter (optionally inside bubblewrap)."""

    def __init__(self, proc: asyncio.subprocess.Process, wrapped: bool):
        self.proc = proc
        self.pid = proc.pid
        self.wrapped = wrapped

    @classmethod
    async def spawn(cls, req_r: int, rep_w: int, workdir: str, lim: SandboxLimits) -> "_ExecProcess":
        argv = [sys.executable, "-I", "-S", "-B", str(WORKER_SCRIPT)]
        if lim.wrapper == "bwrap":
            argv = _bwrap_argv(workdir) + [os.path.realpath(sys.executable), "-I", "-S", "-B", str(WORKER_SCRIPT)]
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
        return cls(proc, lim.wrapper is not None)

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
        """(exit code, negative for a signal; CPU seconds used) -- None when unknown."""
        try:
            code = await asyncio.wait_for(self.proc.wait(), timeout)
        except asyncio.TimeoutError:
            return None, None
        if self.wrapped and code > 128:  # bubblewrap reports a signal death as 128 + signal
            code = -(code - 128)
        return code, None

    def release(self) -> None:
        pass


def _bwrap_argv(workdir: str) -> list[str]:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxError("sandbox_unavailable",
                           "wrapper 'bwrap' is not installed (Debian: apt-get install -y bubblewrap)")
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
    for path in ([prefix] if not prefix.startswith("/usr/") else []) + [worker_dir, workdir]:
        for parent in reversed(Path(path).parents):
            if str(parent) not in ("/", "/usr", "/tmp"):
                argv += ["--perms", "0755", "--dir", str(parent)]
    if not prefix.startswith("/usr/"):
        argv += ["--ro-bind", prefix, prefix]
    argv += ["--ro-bind", worker_dir, worker_dir, "--bind", workdir, workdir, "--chdir", workdir]
    if os.getuid() == 0:  # the worker drops to its throwaway uid inside
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    return argv + ["--"]


class _ForkedProcess:
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

    @classmethod
    async def spawn(cls, req_r: int, rep_w: int, timeout: float) -> "_ForkedProcess":
        for attempt in (1, 2):
            status, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                _fork_server_send([req_r, rep_w, theirs.fileno()])
            except OSError as exc:
                status.close()
                raise SandboxError("sandbox_unavailable", f"cannot reach the fork server: {exc}") from None
            finally:
                theirs.close()
            handle = cls(status)
            try:
                await asyncio.wait_for(handle._started.wait(), timeout)
            except asyncio.TimeoutError:
                handle.release()
                _fork_server_discard()  # too slow: the next worker gets a fresh one
                raise SandboxError("timeout", f"the fork server did not start a worker within {timeout:g} s") from None
            if handle.pid is not None:
                return handle
            handle.release()  # it died before forking ours: start a fresh one and try again
            _fork_server_discard()
        raise SandboxError("sandbox_unavailable", "the fork server died twice before starting a worker")

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
            except (ProcessLookupError, PermissionError, OSError):
                pass

    async def wait(self, timeout: float) -> tuple[int | None, float | None]:
        try:
            await asyncio.wait_for(self._done.wait(), timeout)
        except asyncio.TimeoutError:
            return None, None
        return self.result or (None, None)

    def release(self) -> None:
        if self.status.fileno() >= 0:
            self._loop.remove_reader(self.status.fileno())
            self.status.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


# --------------------------------------------------------------------------- the fork server


class _ForkServer:
    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", str(WORKER_SCRIPT), "--fork-server", str(theirs.fileno())],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, env={}, cwd="/",
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

    def send(self, fds: list[int]) -> None:
        socket.send_fds(self.sock, [b"spawn"], fds)

    def close(self) -> None:
        self.sock.close()  # the fork server kills its children and exits on end of file
        if self.owner != os.getpid():
            return
        try:
            self.proc.wait(2.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_SERVER: _ForkServer | None = None
_RETIRED: list[_ForkServer] = []  # replaced while still running: they keep serving their workers
_SERVER_LOCK = threading.Lock()


def _retire_locked() -> None:
    """Stop using the current fork server without killing it: a slow (not dead) one would
    take every live worker of other environments down with it."""
    global _SERVER
    if _SERVER is not None:
        if _SERVER.alive():
            _RETIRED.append(_SERVER)
        else:
            _SERVER.close()
        _SERVER = None
    for server in [s for s in _RETIRED if not s.alive()]:
        _RETIRED.remove(server)
        server.close()


def _fork_server_send(fds: list[int]) -> None:
    global _SERVER
    with _SERVER_LOCK:
        for attempt in (1, 2):
            if _SERVER is None or not _SERVER.alive():
                _retire_locked()
                _SERVER = _ForkServer()
            try:
                _SERVER.send(fds)
                return
            except OSError:  # dead (EPIPE) or not reading (timeout)
                _retire_locked()
                if attempt == 2:
                    raise


def _fork_server_discard() -> None:
    with _SERVER_LOCK:
        _retire_locked()


def fork_server_pid() -> int | None:
    """The running fork server's pid in this process, if any (for tests and diagnostics)."""
    server = _SERVER
    return server.proc.pid if server is not None and server.alive() else None


def shutdown_fork_server() -> None:
    """Stop the fork servers (they take any live workers with them); the next worker starts a new one."""
    global _SERVER
    with _SERVER_LOCK:
        for server in [_SERVER, *_RETIRED]:
            if server is not None:
                server.close()
        _SERVER = None
        _RETIRED.clear()


def _forget_fork_server_after_fork() -> None:
    # A forked orchestrator must not share its parent's fork servers (its copies of their
    # sockets would keep them alive after the parent exits): it starts its own when needed.
    global _SERVER, _SERVER_LOCK
    _SERVER_LOCK = threading.Lock()
    for server in [_SERVER, *_RETIRED]:
        if server is not None:
            server.sock.close()
    _SERVER = None
    _RETIRED.clear()


os.register_at_fork(after_in_child=_forget_fork_server_after_fork)
atexit.register(shutdown_fork_server)


# --------------------------------------------------------------------------- the handle


class SandboxedEnv:
    """Async handle on one environment class loaded in a confined worker."""

    def __init__(self, source: str, class_name: str, max_turns: int, limits: SandboxLimits | None = None):
        self.source = source
        self.class_name = class_name
        self.max_turns = max_turns
        self.limits = limits or SandboxLimits()
        self.has_reference = False
        self.applied: dict[str, Any] = {}
        self._proc: _ExecProcess | _ForkedProcess | None = None
        self._chan: _Channel | None = None
        self.uid: int | None = None  # the throwaway uid of the current worker (None: not dropped)
        self._workdir: str | None = None
        self._killed = False  # True once we SIGKILLed the worker ourselves (deadline, bad reply)

    async def __aenter__(self) -> "SandboxedEnv":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        # A failed start (load error, timeout, no isolation) must not leave the worker or
        # its temporary directory behind: ``async with`` never calls __aexit__ when
        # __aenter__ raises.
        try:
            await self._start()
        except BaseException:
            await self.close()
            raise

    async def _start(self) -> None:
        lim = self.limits
        self._killed = False
        self._workdir = tempfile.mkdtemp(prefix="envduels-sbx-")
        uid = self.uid = None
        if lim.drop_privileges and os.getuid() == 0:
            uid = self.uid = _UID_BASE + secrets.randbelow(_UID_SPAN)
            os.chown(self._workdir, uid, uid)
        cfg = {**asdict(lim), "workdir": self._workdir, "uid": uid, "tmpfs_mb": lim.workdir_mb,
               "wrapped": lim.wrapper is not None}
        hello = await self._boot(cfg)
        self.applied = {k: v for k, v in hello.items() if k not in ("id", "ok", "ready")}
        if hello.get("workdir_error"):
            raise SandboxError("sandbox_unavailable",
                               f"the worker cannot enter its working directory ({hello['workdir_error']})")
        if lim.isolate_network and not hello.get("network_isolated"):
            raise SandboxError(
                "sandbox_unavailable",
                "cannot isolate the network for environment code "
                f"({hello.get('network_error', 'unknown reason')}); run as root or enable user namespaces, "
                "or set isolate_network=False knowingly",
            )
        if lim.isolate_filesystem and not hello.get("filesystem_isolated"):
            raise SandboxError(
                "sandbox_unavailable",
                "cannot give environment code a private, read-only view of the filesystem "
                f"({hello.get('filesystem_error', 'unknown reason')}); run as root or enable user namespaces, "
                "or set isolate_filesystem=False knowingly",
            )
        reply = await self._request(
            {"op": "load", "source": self.source, "class_name": self.class_name, "max_turns": self.max_turns},
            lim.load_timeout_s,
            "loading the environment",
            _check_load,
        )
        self.has_reference = reply["has_reference"]

    async def _boot(self, cfg: dict) -> dict:
        """Start a worker and read its hello. Nothing untrusted has run yet, so a worker that does not
        come up in time (a loaded machine) is infrastructure trouble: replace it once before giving up."""
        for attempt in (1, 2):
            await self._spawn()
            try:
                return await self._request(cfg, self.limits.load_timeout_s, "starting the worker", _check_hello)
            except SandboxError as exc:
                if attempt == 2 or exc.kind not in ("timeout", "crash"):
                    raise
                await self._discard_worker()
                self._killed = False
        raise AssertionError("unreachable")

    async def _discard_worker(self) -> None:
        if self._proc is not None:
            self._kill()
            await self._proc.wait(5.0)
            self._proc.release()
            self._proc = None
        if self._chan is not None:
            self._chan.close()
            self._chan = None

    async def _spawn(self) -> None:
        lim = self.limits
        req_r, req_w = os.pipe2(os.O_CLOEXEC)
        rep_r, rep_w = os.pipe2(os.O_CLOEXEC)
        try:
            if lim.fork_server and lim.wrapper is None:
                try:
                    self._proc = await _ForkedProcess.spawn(req_r, rep_w, lim.load_timeout_s)
                except SandboxError as exc:
                    if exc.kind != "sandbox_unavailable":
                        raise
                    # No fork server to be had (it cannot start, or dies at once): the same
                    # confinement in a freshly started interpreter, only slower.
                    self._proc = await _ExecProcess.spawn(req_r, rep_w, self._workdir or "/", lim)
            else:
                self._proc = await _ExecProcess.spawn(req_r, rep_w, self._workdir or "/", lim)
        except BaseException:
            os.close(req_w)
            os.close(rep_r)
            raise
        finally:
            os.close(req_r)
            os.close(rep_w)
        self._chan = await _Channel.open(req_w, rep_r, lim.max_reply_bytes)

    async def reset(self, seed: int) -> tuple[str, dict]:
        reply = await self._request({"op": "reset", "seed": seed}, self.limits.step_timeout_s, "reset()", _check_reset)
        return reply["observation"], reply["info"]

    async def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        reply = await self._request({"op": "step", "action": action}, self.limits.step_timeout_s, "step()", _check_step)
        return reply["observation"], float(reply["reward"]), reply["terminated"], reply["truncated"], reply["info"]

    async def reference_actions(self, seed: int) -> list[str] | None:
        reply = await self._request({"op": "reference", "seed": seed}, self.limits.step_timeout_s,
                                    "reference_actions()", _check_reference)
        return reply["actions"]

    async def sync(self) -> None:
        """One empty round trip: proves that no reply is pending that nobody asked for.

        Environment code can write lines of its own onto the reply pipe (it shares the
        worker's process); a forged line that carries the current request id is taken as
        the reply, and the worker's real reply then waits in the pipe. Call this before
        trusting a finished episode or validation: it fails with ``protocol_violation``
        if anything but its own answer comes back.
        """
        await self._request({"op": "sync"}, self.limits.step_timeout_s, "the closing check", _check_ok)

    async def _request(self, msg: dict, timeout: float, what: str,
                       check: Callable[[dict, SandboxLimits], str | None]) -> dict:
        chan, proc = self._chan, self._proc
        if chan is None or proc is None or proc.exited or self._killed:
            raise SandboxError("crash", f"worker is not running (during {what})")
        stray = chan.stray_bytes()
        if stray:
            self._kill()
            raise SandboxError("protocol_violation", f"{stray} bytes arrived on the protocol channel that no request "
                                                     f"asked for (found before {what}): forged or stray lines")
        rid = secrets.token_hex(8)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if not chan.write(json.dumps({**msg, "id": rid}).encode() + b"\n"):
            raise SandboxError(*self._death_reason(what, await self._wait_exit()))
        try:
            line = await chan.read_line(deadline)
        except asyncio.TimeoutError:
            self._kill()
            raise SandboxError("timeout", f"{what} did not answer within {timeout:g} s") from None
        except _Overflow:
            self._kill()
            raise SandboxError(
                "protocol_violation", f"{what} produced a reply larger than {self.limits.max_reply_bytes} bytes"
            ) from None
        if line is None:
            raise SandboxError(*self._death_reason(what, await self._wait_exit()))
        try:
            reply = json.loads(line)
        except (ValueError, RecursionError):
            self._kill()
            raise SandboxError("protocol_violation", f"{what} produced a malformed reply") from None
        if not isinstance(reply, dict) or reply.get("id") != rid:
            self._kill()
            raise SandboxError("protocol_violation", f"{what} produced a reply line that does not answer the request "
                                                     "(wrong or missing request id): a forged or stray line")
        if chan.stray_bytes():
            self._kill()
            raise SandboxError("protocol_violation", f"{what} produced more than one reply line: forged or stray lines")
        if reply.get("ok") is not True:
            kind, message = reply.get("kind"), reply.get("message")
            if kind not in _WORKER_KINDS or not isinstance(message, str):
                self._kill()
                raise SandboxError("protocol_violation", f"{what} produced a malformed error reply")
            raise SandboxError(kind, _clean_message(message))
        problem = check(reply, self.limits)
        if problem:
            self._kill()
            raise SandboxError("protocol_violation",
                               f"{what} produced a reply that fails the sandbox's checks: {problem}")
        return reply

    async def _wait_exit(self) -> tuple[int | None, float | None]:
        assert self._proc is not None
        result = await self._proc.wait(2.0)
        if result[0] is None:
            self._kill()
        return result

    def _death_reason(self, what: str, result: tuple[int | None, float | None]) -> tuple[str, str]:
        code, cpu = result
        lim = self.limits
        if code is None:
            return "crash", f"worker stopped answering during {what} and its exit status is unknown"
        if code < 0:
            sig = -code
            if sig == signal.SIGXCPU:
                return "resource_limit", f"CPU limit of {lim.cpu_seconds} s exceeded during {what}"
            if sig == signal.SIGKILL and not self._killed:
                if cpu is None:
                    return "resource_limit", (f"worker killed by SIGKILL during {what}: the CPU hard limit of "
                                              f"{lim.cpu_seconds + 1} s, out of memory, or the environment itself")
                if cpu >= lim.cpu_seconds - 0.05:
                    return "resource_limit", f"CPU limit of {lim.cpu_seconds} s exceeded during {what}"
                return "crash", (f"worker was killed by SIGKILL during {what} after {cpu:.2f} s of CPU, not by "
                                 "the sandbox: the environment killed itself or the kernel ran out of memory")
            if sig == signal.SIGXFSZ:
                return "resource_limit", f"file size limit of {lim.max_file_size_mb} MB exceeded during {what}"
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = f"signal {sig}"
            return "crash", f"worker died from signal {name} during {what}"
        return "crash", f"worker exited with code {code} during {what}"

    def _kill(self) -> None:
        if self._proc is not None and not self._proc.exited:
            self._killed = True
            self._proc.kill()

    async def close(self) -> None:
        await self._discard_worker()
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
