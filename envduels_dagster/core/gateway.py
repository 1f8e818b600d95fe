"""One async interface to every model: simulated in-process, everything else via litellm.

Why our own retry loop: litellm is called with ``max_retries=0`` so the number of
attempts, the backoff and the error class of each attempt are ours, deterministic
and recorded. Why a cache in front: a repeated or resumed run must cost nothing
for calls already made. An infrastructure failure raises ``LLMError``; callers
mark the episode ``incomplete``, never a solver failure.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from envduels_dagster.core.cache import CallCache, request_key
from envduels_dagster.core.registry import ModelEntry, Registry

RETRYABLE = frozenset({"rate_limit", "timeout", "server_error", "connection_error", "malformed_response"})


# Errors that no retry or later episode can fix (bad key, unknown provider, malformed request):
# they fail the model's partitions with a clear message instead of marking episodes incomplete.
FATAL = frozenset({"auth_error", "bad_request"})


class LLMError(Exception):
    """A model call that failed for infrastructure reasons after the retry policy gave up."""

    def __init__(self, error_class: str, message: str, attempts: int = 1, retried_errors: list[str] | None = None):
        super().__init__(f"{error_class} after {attempts} attempt(s): {message}")
        self.error_class, self.message, self.attempts = error_class, message, attempts
        self.retried_errors = retried_errors or []

    @property
    def fatal(self) -> bool:
        return self.error_class in FATAL


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    timeout_s: float = 60.0
    jitter: float = 0.25


class ChatResponse(BaseModel):
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    attempts: int = 1
    retried_errors: list[str] = []
    cached: bool = False


@dataclass
class GatewayStats:
    """Counters for progress reporting and tests (backend_calls excludes cache hits)."""

    backend_calls: Counter = field(default_factory=Counter)
    cache_hits: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)


class Gateway:
    def __init__(self, registry: Registry, cache: CallCache | None = None, policy: RetryPolicy | None = None,
                 sim_latency_s: float = 0.0, litellm_processes: int | None = None):
        self.registry = registry
        # litellm spends ~8-10 ms of CPU per call: one event loop tops out near 100 calls/s. With
        # N > 0, litellm calls run in N worker processes instead (ENVDUELS_LITELLM_PROCESSES).
        if litellm_processes is None:
            litellm_processes = int(os.environ.get("ENVDUELS_LITELLM_PROCESSES") or 0)
        self.litellm_processes = max(0, litellm_processes)
        self._litellm_workers: LitellmWorkers | None = None
        self.cache = cache
        self.policy = policy or RetryPolicy()
        self.sim_latency_s = sim_latency_s  # makes simulated models behave like slow providers (demos, tests)
        self.stats = GatewayStats()
        self._pools: dict[str, asyncio.Semaphore] = {}
        self._limiters: dict[str, RateLimiter] = {}
        self._fast_client = None
        self._sims: dict[str, Any] = {}
        self._unpriced: set[str] = set()  # litellm model strings its price map does not know

    def _pool(self, entry: ModelEntry) -> asyncio.Semaphore:
        if entry.provider not in self._pools:
            self._pools[entry.provider] = asyncio.Semaphore(entry.max_concurrency)
            if entry.requests_per_minute:
                self._limiters[entry.provider] = RateLimiter(entry.requests_per_minute)
        return self._pools[entry.provider]

    async def _admit(self, entry: ModelEntry) -> None:
        """Wait for the pool's rate limiter, if the registry sets one."""
        limiter = self._limiters.get(entry.provider)
        if limiter is not None:
            await limiter.acquire()

    async def chat(self, model_name: str, messages: list[dict[str, str]], *, seed: int | None = None) -> ChatResponse:
        entry = self.registry.get(model_name)
        key = request_key({
            "model": entry.model, "api_base": entry.api_base, "version": entry.version,
            "temperature": entry.temperature, "max_tokens": entry.max_tokens, "seed": seed, "messages": messages,
        })
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            self.stats.cache_hits[model_name] += 1
            return ChatResponse(**{**hit, "cached": True, "latency_s": 0.0, "cost_usd": 0.0, "attempts": 0,
                                   "retried_errors": []})
        if entry.is_simulated:
            if self.sim_latency_s or entry.requests_per_minute:
                async with self._pool(entry):
                    await self._admit(entry)
                    await asyncio.sleep(self.sim_latency_s)
            response = self._simulated(entry, messages, seed)
        else:
            api_key = self.registry.api_key(model_name)  # RegistryError if the variable is unset
            async with self._pool(entry):
                response = await self._with_retries(entry, messages, seed, api_key)
        self.stats.backend_calls[model_name] += 1
        if self.cache is not None:
            self.cache.put(key, entry.model, response.model_dump(include={"text", "prompt_tokens", "completion_tokens"}))
        return response

    def _simulated(self, entry: ModelEntry, messages: list[dict[str, str]], seed: int | None) -> ChatResponse:
        from envduels_dagster.sim.model import SimulatedModel, estimate_usage, profile_for_model_string

        t0 = time.perf_counter()
        sim = self._sims.get(entry.model)
        if sim is None:
            sim = self._sims[entry.model] = SimulatedModel(profile_for_model_string(entry.model))
        text = sim.respond(messages, seed)
        prompt_tokens, completion_tokens = estimate_usage(messages, text)
        return ChatResponse(text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                            cost_usd=entry.cost(prompt_tokens, completion_tokens),
                            latency_s=time.perf_counter() - t0)

    def _fast(self):
        if self._fast_client is None:
            from envduels_dagster.core.fast_client import FastClient

            self._fast_client = FastClient()
        return self._fast_client

    async def aclose(self) -> None:
        """Close pooled HTTP connections and write pending cache rows; call before the event loop ends."""
        if self.cache is not None:
            self.cache.flush()
        if self._fast_client is not None:
            await self._fast_client.aclose()
        if self._litellm_workers is not None:
            workers, self._litellm_workers = self._litellm_workers, None
            await workers.aclose()

    async def _with_retries(self, entry: ModelEntry, messages, seed, api_key) -> ChatResponse:
        policy = self.policy
        errors: list[str] = []
        for attempt in range(1, policy.max_attempts + 1):
            await self._admit(entry)
            t0 = time.perf_counter()
            try:
                if entry.uses_fast_client:
                    text, pt, ct = await self._fast().chat(
                        entry.api_base, entry.model.split("/", 1)[1], messages, api_key=api_key,
                        temperature=entry.temperature, max_tokens=entry.max_tokens, seed=seed,
                        timeout_s=policy.timeout_s)
                    cost = None
                elif self.litellm_processes:
                    if self._litellm_workers is None:
                        self._litellm_workers = LitellmWorkers(self.litellm_processes)
                    text, pt, ct, cost = await self._litellm_workers.call(entry, messages, seed, api_key,
                                                                          policy.timeout_s)
                else:
                    text, pt, ct, cost = await _litellm_call(entry, messages, seed, api_key, policy.timeout_s,
                                                             self._unpriced)
            except Exception as exc:  # noqa: BLE001 - classified below
                error_class, retry_after = classify_exception(exc)
                self.stats.errors[error_class] += 1
                errors.append(error_class)
                if error_class not in RETRYABLE or attempt == policy.max_attempts:
                    raise LLMError(error_class, _safe_message(exc, api_key), attempt, errors[:-1]) from None
                delay = min(policy.max_delay_s, policy.base_delay_s * 2 ** (attempt - 1))
                delay *= 1 + random.uniform(-policy.jitter, policy.jitter)
                if retry_after is not None:
                    delay = max(delay, min(retry_after, policy.max_delay_s))
                await asyncio.sleep(delay)
                continue
            return ChatResponse(text=text, prompt_tokens=pt, completion_tokens=ct,
                                cost_usd=cost if cost is not None else entry.cost(pt, ct),
                                latency_s=time.perf_counter() - t0, attempts=attempt, retried_errors=errors)
        raise AssertionError("unreachable")


class RateLimiter:
    """Spaces requests evenly at ``per_minute``: a provider's limit holds however many tasks wait."""

    def __init__(self, per_minute: float):
        self.interval = 60.0 / per_minute
        self._next = 0.0
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        async with self._lock:
            now = time.monotonic()
            wait = self._next - now
            self._next = max(now, self._next) + self.interval
        if wait > 0:
            await asyncio.sleep(wait)


def _safe_message(exc: Exception, api_key: str | None) -> str:
    """Error text with any trace of the key removed (providers sometimes echo it)."""
    text = exc.message if isinstance(exc, RemoteCallError) else f"{type(exc).__name__}: {exc}"[:500]
    if api_key:
        text = text.replace(api_key, "***")
    return text


def _litellm_module():
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # never download the price map
    import litellm  # slow (~4 s): imported only when a non-simulated model is called

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return litellm


async def run_and_close(gateway: "Gateway", coro):
    """Await ``coro`` and close the gateway's pooled connections in the same event loop."""
    try:
        return await coro
    finally:
        await gateway.aclose()


async def _litellm_call(entry: ModelEntry, messages, seed, api_key, timeout_s, unpriced: set[str] | None = None):
    """One litellm call -> (text, prompt_tokens, completion_tokens, cost or None for the registry's prices).

    Cost: litellm prices every response itself (``_hidden_params["response_cost"]``); we read
    that instead of pricing it a second time. Where the registry gives prices, or litellm's
    price map turned out not to know the model (``unpriced``), we pass explicit per-token
    prices so that litellm skips its price-map search (~1 ms of CPU per call for unknown models).
    """
    litellm = _litellm_module()
    kwargs: dict[str, Any] = dict(model=entry.model, messages=messages, temperature=entry.temperature,
                                  max_tokens=entry.max_tokens, timeout=timeout_s, max_retries=0)
    registry_priced = bool(entry.input_cost_per_mtok or entry.output_cost_per_mtok)
    if registry_priced or (unpriced is not None and entry.model in unpriced):
        kwargs["input_cost_per_token"] = entry.input_cost_per_mtok / 1e6
        kwargs["output_cost_per_token"] = entry.output_cost_per_mtok / 1e6
    if entry.api_base:
        kwargs["api_base"] = entry.api_base
    if api_key:
        kwargs["api_key"] = api_key
    elif entry.api_base:
        kwargs["api_key"] = "no-key"  # self-hosted OpenAI-compatible servers (vLLM, Ollama) often need none
    if seed is not None:
        kwargs["seed"] = seed
    response = await litellm.acompletion(**kwargs)
    try:
        text = response.choices[0].message.content
        usage = response.usage
        pt, ct = int(usage.prompt_tokens), int(usage.completion_tokens)
    except (AttributeError, IndexError, TypeError, ValueError) as exc:
        raise MalformedResponse(f"response lacks content or usage: {exc}") from None
    if not isinstance(text, str):
        raise MalformedResponse("response content is not text")
    cost = None
    if not registry_priced and "input_cost_per_token" not in kwargs:
        hidden = getattr(response, "_hidden_params", None) or {}
        try:
            cost = hidden.get("response_cost")
            cost = float(cost) if cost is not None else None
        except (TypeError, ValueError, AttributeError):
            cost = None
        if cost is None:  # unknown models have no price; fall back to registry prices (0)
            try:
                cost = float(litellm.completion_cost(completion_response=response))
            except Exception:  # noqa: BLE001
                cost = None
                if unpriced is not None:
                    unpriced.add(entry.model)
    return text, pt, ct, cost


class MalformedResponse(Exception):
    pass


def classify_exception(exc: Exception) -> tuple[str, float | None]:
    """Map provider/client exceptions to our error taxonomy, plus a Retry-After if given."""
    if isinstance(exc, RemoteCallError):  # classified where it happened, in a litellm worker process
        return exc.error_class, exc.retry_after
    name = type(exc).__name__
    retry_after = None
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or getattr(exc, "litellm_response_headers", None) or {}
    try:
        value = headers.get("retry-after") or headers.get("Retry-After")
        retry_after = float(value) if value is not None else None
    except (TypeError, ValueError, AttributeError):
        retry_after = None
    if isinstance(exc, MalformedResponse) or name in ("MalformedBody", "JSONDecodeError", "APIResponseValidationError"):
        return "malformed_response", None
    if retry_after is None:
        retry_after = getattr(exc, "retry_after", None)
    text = str(exc)
    if "Connection error" in text or "ConnectError" in text or "Cannot connect to host" in text:
        return "connection_error", None  # litellm reports refused connections as InternalServerError
    status = getattr(exc, "status_code", None)
    table = {
        "RateLimitError": "rate_limit", "Timeout": "timeout", "APITimeoutError": "timeout",
        "TimeoutError": "timeout", "InternalServerError": "server_error", "ServiceUnavailableError": "server_error",
        "BadGatewayError": "server_error", "APIConnectionError": "connection_error",
        "AuthenticationError": "auth_error", "PermissionDeniedError": "auth_error",
        "BadRequestError": "bad_request", "NotFoundError": "bad_request", "UnprocessableEntityError": "bad_request",
        "ContextWindowExceededError": "bad_request", "ContentPolicyViolationError": "bad_request",
    }
    if name in table:
        return table[name], retry_after
    if status == 429:
        return "rate_limit", retry_after
    if isinstance(status, int) and status >= 500:
        return "server_error", retry_after
    if status in (401, 403):
        return "auth_error", None
    if status in (400, 404, 409, 413, 422):
        return "bad_request", None
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timeout", None
    if isinstance(exc, (ConnectionError, OSError)):
        return "connection_error", None
    if "APIError" in name:
        return "server_error", retry_after
    return "unknown", None


# --------------------------------------------------------------------------- litellm worker processes


class RemoteCallError(Exception):
    """A litellm call that failed in a worker process, already classified there."""

    def __init__(self, error_class: str, retry_after: float | None, message: str):
        super().__init__(message)
        self.error_class, self.retry_after, self.message = error_class, retry_after, message


class LitellmWorkers:
    """litellm calls spread over ``n`` child processes, each with its own event loop.

    Why: litellm costs ~8-10 ms of client CPU per call (most of it bookkeeping around the
    request), so one Python process saturates its core near 100 calls/s, below what 64
    calls in flight against a 0.5 s provider need (128/s). The children run exactly the
    in-process code (``_litellm_call``) and classify failures with ``classify_exception``
    and ``_safe_message`` where they happen, so the parent's retry loop sees the same error
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
            sys.executable, "-c", "from envduels_dagster.core.gateway import _litellm_worker_main as m; m()",
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
                    pending[1].set_exception(RemoteCallError(*reply["error"]))
                else:
                    pending[1].set_result(tuple(reply["ok"]))
        finally:
            for call_id, (owner, fut) in list(self._pending.items()):
                if owner == i:
                    self._pending.pop(call_id, None)
                    if not fut.done():
                        fut.set_exception(ConnectionError("litellm worker process exited"))

    async def call(self, entry: ModelEntry, messages, seed, api_key, timeout_s):
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
                                           "seed": seed, "api_key": api_key, "timeout_s": timeout_s}) + b"\n")
            async with asyncio.timeout(timeout_s + 10):  # the worker enforces timeout_s itself
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
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()
            if self._readers[i] is not None:
                await asyncio.gather(self._readers[i], return_exceptions=True)
        self._procs = [None] * self.n


def _litellm_worker_main() -> None:
    """Child side of ``LitellmWorkers``: JSON lines in, JSON lines out, calls run concurrently."""
    import orjson

    # The protocol owns the real stdout; anything litellm prints goes to stderr instead.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    _litellm_module()
    unpriced: set[str] = set()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        tasks: set[asyncio.Task] = set()

        async def handle(req: dict) -> None:
            api_key = req["api_key"]
            try:
                entry = ModelEntry(**req["entry"])
                result = await _litellm_call(entry, req["messages"], req["seed"], api_key, req["timeout_s"], unpriced)
                reply = {"id": req["id"], "ok": list(result)}
            except Exception as exc:  # noqa: BLE001 - classified here, raised again in the parent
                error_class, retry_after = classify_exception(exc)
                reply = {"id": req["id"], "error": [error_class, retry_after, _safe_message(exc, api_key)]}
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
