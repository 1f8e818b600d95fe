"""Run untrusted environment code in a confined worker process (DESIGN §3).

Why a process per environment instance: model-written code must never share
memory, file descriptors or secrets with the orchestrator, and a runaway
environment must be killable without killing the run. The worker confines
itself (network namespace, unprivileged uid, rlimits) before it sees the code;
this side enforces wall-clock deadlines and kills the whole process group.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

WORKER_SCRIPT = Path(__file__).with_name("sandbox_worker.py")
# Each worker runs under its own throwaway uid so that one environment cannot
# signal or read another's processes; root may setuid to ids with no passwd entry.
# Drawn at random from ~2**31 ids: a per-process counter offset by pid % 1000 gave two
# orchestrator processes whose pids agree mod 1000 (parallel Dagster runs) the same uids.
_UID_BASE = 200_000
_UID_SPAN = 2**31 - _UID_BASE

ERROR_KINDS = ("load_error", "timeout", "crash", "protocol_violation", "resource_limit", "sandbox_unavailable")


@dataclass(frozen=True)
class SandboxLimits:
    """Limits applied to every worker. Defaults suit the text games we run."""

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


class SandboxError(Exception):
    """A failure of the environment inside the sandbox, classified by ``kind``."""

    def __init__(self, kind: str, message: str):
        assert kind in ERROR_KINDS, kind
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class SandboxedEnv:
    """Async handle on one environment class loaded in a confined worker."""

    def __init__(self, source: str, class_name: str, max_turns: int, limits: SandboxLimits | None = None):
        self.source = source
        self.class_name = class_name
        self.max_turns = max_turns
        self.limits = limits or SandboxLimits()
        self.has_reference = False
        self.applied: dict[str, Any] = {}
        self._proc: asyncio.subprocess.Process | None = None
        self._workdir: str | None = None
        self._killed = False  # True once we SIGKILLed the group ourselves (deadline, bad reply)

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
        uid = None
        if lim.drop_privileges and os.getuid() == 0:
            uid = _UID_BASE + secrets.randbelow(_UID_SPAN)
            os.chown(self._workdir, uid, uid)
        cfg = {**asdict(lim), "workdir": self._workdir, "uid": uid}
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-S", "-B", str(WORKER_SCRIPT),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={},  # no inherited secrets
            cwd=self._workdir,
            start_new_session=True,  # own process group, killed as a whole
            limit=lim.max_reply_bytes,
        )
        hello = await self._request(cfg, lim.load_timeout_s, "starting the worker")
        self.applied = hello
        if lim.isolate_network and not hello.get("network_isolated"):
            raise SandboxError(
                "sandbox_unavailable",
                "cannot isolate the network for environment code "
                f"({hello.get('network_error', 'unknown reason')}); run as root or enable user namespaces, "
                "or set isolate_network=False knowingly",
            )
        reply = await self._request(
            {"op": "load", "source": self.source, "class_name": self.class_name, "max_turns": self.max_turns},
            lim.load_timeout_s,
            "loading the environment",
        )
        self.has_reference = bool(reply.get("has_reference"))

    async def reset(self, seed: int) -> tuple[str, dict]:
        reply = await self._request({"op": "reset", "seed": seed}, self.limits.step_timeout_s, "reset()")
        return reply["observation"], reply["info"]

    async def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        reply = await self._request({"op": "step", "action": action}, self.limits.step_timeout_s, "step()")
        return reply["observation"], reply["reward"], reply["terminated"], reply["truncated"], reply["info"]

    async def reference_actions(self, seed: int) -> list[str] | None:
        reply = await self._request({"op": "reference", "seed": seed}, self.limits.step_timeout_s, "reference_actions()")
        return reply["actions"]

    async def _request(self, msg: dict, timeout: float, what: str) -> dict:
        proc = self._proc
        if proc is None or proc.returncode is not None:
            raise SandboxError("crash", f"worker is not running (during {what})")
        try:
            proc.stdin.write(json.dumps(msg).encode() + b"\n")
            await proc.stdin.drain()
            line = await asyncio.wait_for(proc.stdout.readline(), timeout)
        except asyncio.TimeoutError:
            self._kill()
            raise SandboxError("timeout", f"{what} did not answer within {timeout:g} s") from None
        except (ValueError, asyncio.LimitOverrunError):
            self._kill()
            raise SandboxError(
                "protocol_violation", f"{what} produced a reply larger than {self.limits.max_reply_bytes} bytes"
            ) from None
        except (BrokenPipeError, ConnectionResetError):
            line = b""
        if not line:
            raise SandboxError(*self._death_reason(what, await self._wait_exit()))
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            self._kill()
            raise SandboxError("protocol_violation", f"{what} produced a malformed reply") from None
        if not reply.get("ok"):
            kind = reply.get("kind", "crash")
            raise SandboxError(kind if kind in ERROR_KINDS else "crash", reply.get("message", "unknown error"))
        return reply

    async def _wait_exit(self) -> int | None:
        assert self._proc is not None
        try:
            return await asyncio.wait_for(self._proc.wait(), 2.0)
        except asyncio.TimeoutError:
            self._kill()
            return None

    def _death_reason(self, what: str, code: int | None) -> tuple[str, str]:
        if code is not None and code < 0:
            sig = -code
            if sig == signal.SIGXCPU:
                return "resource_limit", f"CPU limit of {self.limits.cpu_seconds} s exceeded during {what}"
            if sig == signal.SIGKILL and not self._killed:
                # Nobody but the kernel kills a throwaway uid: the CPU hard limit (SIGXCPU
                # ignored) or the out-of-memory killer.
                return "resource_limit", (f"worker killed by the kernel (CPU hard limit of "
                                          f"{self.limits.cpu_seconds + 1} s or out of memory) during {what}")
            if sig == signal.SIGXFSZ:
                return "resource_limit", f"file size limit of {self.limits.max_file_size_mb} MB exceeded during {what}"
            return "crash", f"worker died from signal {signal.Signals(sig).name} during {what}"
        return "crash", f"worker exited with code {code} during {what}"

    def _kill(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            self._killed = True
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    async def close(self) -> None:
        if self._proc is not None:
            self._kill()
            try:
                await asyncio.wait_for(self._proc.wait(), 5.0)
            except asyncio.TimeoutError:
                pass
            self._proc = None
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
