"""``SandboxedEnv``: the async handle on one environment class in a confined worker.

Why a handle per environment: the worker is reused across seeds (a fresh instance
per ``reset``), so a validation or a set of episodes pays one worker start. The
handle owns the worker's lifetime -- its temporary directory, its process, its
channel -- and turns every way a worker can fail into a classified ``SandboxError``.
"""

from __future__ import annotations

import os
import secrets
import shutil
from typing import Any

from envduels_dagster.core.sandbox import replies, workdirs
from envduels_dagster.core.sandbox.channel import Channel, ChannelClosed
from envduels_dagster.core.sandbox.launchers import Launcher, WorkerProcess, get_launcher
from envduels_dagster.core.sandbox.limits import UID_BASE, UID_SPAN, SandboxError, SandboxLimits, worker_config
from envduels_dagster.core.sandbox.refusal import refusal_message


class SandboxedEnv:
    """Async handle on one environment class loaded in a confined worker."""

    def __init__(self, source: str, class_name: str, max_turns: int, limits: SandboxLimits | None = None,
                 launcher: Launcher | None = None):
        self.source = source
        self.class_name = class_name
        self.max_turns = max_turns
        self.limits = limits or SandboxLimits()
        self.launcher = launcher or get_launcher(self.limits.launcher)
        self.has_reference = False
        self.applied: dict[str, Any] = {}
        self._proc: WorkerProcess | None = None
        self._chan: Channel | None = None
        self.uid: int | None = None  # the throwaway uid of the current worker (None: not dropped)
        self._workdir: str | None = None
        self._killed = False  # True once we SIGKILLed the worker ourselves (deadline, bad reply)

    async def __aenter__(self) -> SandboxedEnv:
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
        self._workdir = workdirs.new_workdir()
        uid = self.uid = None
        if lim.drop_privileges and os.getuid() == 0:
            uid = self.uid = UID_BASE + secrets.randbelow(UID_SPAN)
            os.chown(self._workdir, uid, uid)
        hello = await self._boot(worker_config(lim, self._workdir, uid))
        self.applied = {k: v for k, v in hello.items() if k not in ("id", "ok", "ready")}
        if hello.get("workdir_error"):
            raise SandboxError("sandbox_unavailable",
                               f"the worker cannot enter its working directory ({hello['workdir_error']})")
        if lim.isolate_network and not hello.get("network_isolated"):
            raise SandboxError("sandbox_unavailable", refusal_message(
                "isolate the network for environment code", hello.get("network_error", "unknown reason"),
                "isolate_network"))
        if lim.isolate_filesystem and not hello.get("filesystem_isolated"):
            raise SandboxError("sandbox_unavailable", refusal_message(
                "give environment code a private, read-only view of the filesystem",
                hello.get("filesystem_error", "unknown reason"), "isolate_filesystem"))
        if (lim.isolate_filesystem and lim.narrow_filesystem and lim.wrapper is None
                and not hello.get("filesystem_narrowed")):
            raise SandboxError("sandbox_unavailable",
                               "cannot narrow the filesystem environment code sees "
                               f"({hello.get('narrow_error', 'unknown reason')}); set narrow_filesystem=False knowingly")
        reply = await self._request(
            {"op": "load", "source": self.source, "class_name": self.class_name, "max_turns": self.max_turns},
            lim.load_timeout_s, "loading the environment", replies.check_load,
        )
        self.has_reference = reply["has_reference"]

    async def _boot(self, cfg: dict) -> dict:
        """Start a worker and read its hello. Nothing untrusted has run yet, so a worker that does not
        come up in time (a loaded machine) is infrastructure trouble: replace it once before giving up."""
        for attempt in (1, 2):
            await self._spawn()
            try:
                return await self._request(cfg, self.limits.load_timeout_s, "starting the worker",
                                           replies.check_hello)
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
        req_r, req_w = os.pipe2(os.O_CLOEXEC)
        rep_r, rep_w = os.pipe2(os.O_CLOEXEC)
        try:
            self._proc = await self.launcher.spawn(req_r, rep_w, self._workdir or "/", self.limits)
        except BaseException:
            os.close(req_w)
            os.close(rep_r)
            raise
        finally:
            os.close(req_r)
            os.close(rep_w)
        self._chan = await Channel.open(req_w, rep_r, self.limits.max_reply_bytes)

    async def reset(self, seed: int) -> tuple[str, dict]:
        reply = await self._request({"op": "reset", "seed": seed}, self.limits.step_timeout_s, "reset()",
                                    replies.check_reset, self.limits.step_reply_bytes())
        return reply["observation"], reply["info"]

    async def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        reply = await self._request({"op": "step", "action": action}, self.limits.step_timeout_s, "step()",
                                    replies.check_step, self.limits.step_reply_bytes())
        return reply["observation"], float(reply["reward"]), reply["terminated"], reply["truncated"], reply["info"]

    async def reference_actions(self, seed: int) -> list[str] | None:
        reply = await self._request({"op": "reference", "seed": seed}, self.limits.step_timeout_s,
                                    "reference_actions()", replies.check_reference)
        return reply["actions"]

    async def sync(self) -> None:
        """One empty round trip: proves that no reply is pending that nobody asked for.

        Environment code can write lines of its own onto the reply pipe (it shares the
        worker's process); a forged line that carries the current request id is taken as
        the reply, and the worker's real reply then waits in the pipe. Call this before
        trusting a finished episode or validation: it fails with ``protocol_violation``
        if anything but its own answer comes back.
        """
        await self._request({"op": "sync"}, self.limits.step_timeout_s, "the closing check", replies.check_ok)

    async def _request(self, msg: dict, timeout: float, what: str, check: replies.Check,
                       limit: int | None = None) -> dict:
        chan, proc = self._chan, self._proc
        if chan is None or proc is None or proc.exited or self._killed:
            raise SandboxError("crash", f"worker is not running (during {what})")
        try:
            reply = await chan.call(msg, timeout, what, limit)
        except ChannelClosed:
            raise await self._death_reason(what) from None
        except SandboxError:
            self._kill()
            raise
        error, kill = replies.judge(reply, what, check, self.limits)
        if kill:
            self._kill()
        if error is not None:
            raise error
        return reply

    async def _death_reason(self, what: str) -> SandboxError:
        assert self._proc is not None
        code, cpu = await self._proc.wait(2.0)
        if code is None:
            self._kill()
        return replies.death_reason(what, code, cpu, self._killed, self.limits)

    def _kill(self) -> None:
        if self._proc is not None and not self._proc.exited:
            self._killed = True
            self._proc.kill()

    async def close(self) -> None:
        await self._discard_worker()
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
