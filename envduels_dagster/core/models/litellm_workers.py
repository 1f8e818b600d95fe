"""litellm calls spread over worker processes, each with its own event loop.

Why: litellm costs ~8-10 ms of client CPU per call (most of it bookkeeping around the
request), so one Python process saturates its core near 100 calls/s, below what 64
calls in flight against a 0.5 s provider need (128/s). Set ENVDUELS_LITELLM_PROCESSES=N.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys

from envduels_dagster.core.models.errors import classify_exception, safe_message
from envduels_dagster.core.models.litellm_call import litellm_call, litellm_module
from envduels_dagster.core.models.registry import ModelEntry
from envduels_dagster.core.models.types import BackendError, CallConfig, Completion

# Kept for callers of the old name (a call failed in a worker, classified there).
RemoteCallError = BackendError


class LitellmWorkers:
    """litellm calls spread over ``n`` child processes, each with its own event loop.

    Why: litellm costs ~8-10 ms of client CPU per call (most of it bookkeeping around the
    request), so one Python process saturates its core near 100 calls/s, below what 64
    calls in flight against a 0.5 s provider need (128/s). The children run exactly the
    in-process code (``litellm_call``) and classify failures with ``classify_exception``
    and ``safe_message`` where they happen, so the parent's retry loop sees the same error
    classes, messages, Retry-After values and results. The parent only moves orjson lines
    over pipes (~0.05 ms per call). Keys travel per request over the pipe, never on disk
    or in a command line. A worker that dies fails its calls as ``connection_error``
    (retried) and is replaced.
    """

    def __init__(self, n: int):
        self.n = n
        self._procs: list[asyncio.subprocess.Process | None] = [None] * n
        self._readers: list[asyncio.Task | None] = [None] * n
        self._inflight = [0] * n
        self._pending: dict[int, tuple[int, asyncio.Future]] = {}
        self._next_id = 0
        self._start_lock: asyncio.Lock | None = None

    def _alive(self, i: int) -> bool:
        proc = self._procs[i]
        return proc is not None and proc.returncode is None

    async def _ensure(self, i: int) -> asyncio.subprocess.Process:
        if not self._alive(i):
            if self._start_lock is None:
                self._start_lock = asyncio.Lock()
            async with self._start_lock:  # (re)start every dead worker at once: each imports litellm (~4 s)
                dead = [j for j in range(self.n) if not self._alive(j)]
                await asyncio.gather(*(self._start(j) for j in dead))
        return self._procs[i]

    async def _start(self, i: int) -> None:
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "from envduels_dagster.core.models.litellm_workers import worker_main as m; m()",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env, limit=64 * 1024 * 1024)
        ready = await proc.stdout.readline()
        if not ready.startswith(b"ready"):
            proc.kill()
            await proc.wait()
            raise ConnectionError("litellm worker process failed to start")
        self._procs[i] = proc
        self._readers[i] = asyncio.ensure_future(self._read(i, proc))

    async def _read(self, i: int, proc) -> None:
        import orjson

        try:
            while line := await proc.stdout.readline():
                try:
                    reply = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                pending = self._pending.pop(reply["id"], None)
                if pending is None or pending[1].done():
                    continue
                if "error" in reply:
                    pending[1].set_exception(BackendError(*reply["error"]))
                else:
                    pending[1].set_result(Completion(*reply["ok"]))
        finally:
            for call_id, (owner, fut) in list(self._pending.items()):
                if owner == i:
                    self._pending.pop(call_id, None)
                    if not fut.done():
                        fut.set_exception(ConnectionError("litellm worker process exited"))

    async def call(self, entry: ModelEntry, messages, config: CallConfig) -> Completion:
        import orjson

        i = min(range(self.n), key=self._inflight.__getitem__)
        self._next_id += 1
        call_id = self._next_id
        self._inflight[i] += 1
        try:
            proc = await self._ensure(i)
            fut = asyncio.get_running_loop().create_future()
            self._pending[call_id] = (i, fut)
            proc.stdin.write(orjson.dumps({"id": call_id, "entry": entry.model_dump(), "messages": messages,
                                           "config": dataclasses.asdict(config)}) + b"\n")
            async with asyncio.timeout(config.timeout_s + 10):  # the worker enforces timeout_s itself
                return await fut
        finally:
            self._inflight[i] -= 1
            self._pending.pop(call_id, None)

    async def aclose(self) -> None:
        for i, proc in enumerate(self._procs):
            if proc is None:
                continue
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except TimeoutError:
                proc.kill()
                await proc.wait()
            if self._readers[i] is not None:
                await asyncio.gather(self._readers[i], return_exceptions=True)
        self._procs = [None] * self.n


def worker_main() -> None:
    """Child side of ``LitellmWorkers``: JSON lines in, JSON lines out, calls run concurrently."""
    import orjson

    # The protocol owns the real stdout; anything litellm prints goes to stderr instead.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    litellm_module()
    unpriced: set[str] = set()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        tasks: set[asyncio.Task] = set()

        async def handle(req: dict) -> None:
            api_key = req["config"].get("api_key")
            try:
                entry = ModelEntry(**req["entry"])
                result = await litellm_call(entry, req["messages"], CallConfig(**req["config"]), unpriced)
                reply = {"id": req["id"], "ok": list(dataclasses.astuple(result))}
            except Exception as exc:  # noqa: BLE001 - classified here, raised again in the parent
                error_class, retry_after = classify_exception(exc)
                reply = {"id": req["id"], "error": [error_class, retry_after, safe_message(exc, api_key)]}
            out.write(orjson.dumps(reply) + b"\n")
            out.flush()

        out.write(b"ready\n")
        out.flush()
        while line := await reader.readline():
            task = asyncio.ensure_future(handle(orjson.loads(line)))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())
