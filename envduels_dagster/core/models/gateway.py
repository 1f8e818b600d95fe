"""One async interface to every model: cache, pools, rate limits and retries, once, over any backend.

Why our own retry loop: litellm is called with ``max_retries=0`` so the number of
attempts, the backoff and the error class of each attempt are ours, deterministic
and recorded. Why a cache in front: a repeated or resumed run must cost nothing
for calls already made. An infrastructure failure raises ``LLMError``; callers
mark the episode ``incomplete``, never a solver failure. Which backend serves a
model is the backend registry's business (``providers.py``); the gateway never names one.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field

from envduels_dagster.core.cache import CallCache, request_key
from envduels_dagster.core.models.errors import classify_exception, safe_message
from envduels_dagster.core.models.providers import UnknownProviderError, backend_class, backend_name
from envduels_dagster.core.models.types import (
    RETRYABLE,
    BackendCall,
    BackendOptions,
    ChatBackend,
    ChatResponse,
    LLMError,
    Request,
    RetryPolicy,
)
from envduels_dagster.core.registry import ModelEntry, Registry


@dataclass
class GatewayStats:
    """Counters for progress reporting and tests (backend_calls excludes cache hits)."""

    backend_calls: Counter = field(default_factory=Counter)
    cache_hits: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)


class Gateway:
    def __init__(self, registry: Registry, cache: CallCache | None = None, policy: RetryPolicy | None = None,
                 sim_latency_s: float = 0.0, litellm_processes: int | None = None, ledger=None):
        self.registry = registry
        # core/budget.BudgetLedger or None: consulted before every call that costs money (a cache miss of a
        # priced model) when a cap is set; a call that would pass a cap raises BudgetExhausted, unmade.
        self.ledger = ledger
        # litellm spends ~8-10 ms of CPU per call: one event loop tops out near 100 calls/s. With
        # N > 0, litellm calls run in N worker processes instead (ENVDUELS_LITELLM_PROCESSES).
        if litellm_processes is None:
            litellm_processes = int(os.environ.get("ENVDUELS_LITELLM_PROCESSES") or 0)
        self.litellm_processes = max(0, litellm_processes)
        self.cache = cache
        self.policy = policy or RetryPolicy()
        self.sim_latency_s = sim_latency_s  # makes simulated models behave like slow providers (demos, tests)
        self.stats = GatewayStats()
        self._pools: dict[str, asyncio.Semaphore] = {}
        self._limiters: dict[str, RateLimiter] = {}
        self._backends: dict[str, ChatBackend] = {}
        self._routes: dict[str, str] = {}  # model name -> backend name

    def _pool(self, entry: ModelEntry) -> asyncio.Semaphore:
        if entry.provider not in self._pools:
            # one pool per provider for every pair the run plays at once (issue 35)
            self._pools[entry.provider] = asyncio.Semaphore(entry.max_in_flight or entry.max_concurrency)
            if entry.requests_per_minute:
                self._limiters[entry.provider] = RateLimiter(entry.requests_per_minute)
        return self._pools[entry.provider]

    async def _admit(self, entry: ModelEntry) -> None:
        """Wait for the pool's rate limiter, if the registry sets one."""
        limiter = self._limiters.get(entry.provider)
        if limiter is not None:
            await limiter.acquire()

    def backend(self, entry: ModelEntry) -> ChatBackend:
        """The backend instance serving ``entry`` (one per backend and gateway)."""
        name = self._routes.get(entry.name)
        if name is None:
            try:
                name = backend_name(entry.model, entry)
            except UnknownProviderError as exc:  # fails this model's partitions, not the others
                self.stats.errors["bad_request"] += 1
                raise LLMError("bad_request", str(exc)) from None
            except ValueError as exc:  # an inconsistent entry (e.g. client: fast without api_base)
                self.stats.errors["unknown"] += 1
                raise LLMError("unknown", f"ValueError: {exc}") from None
            self._routes[entry.name] = name
        backend = self._backends.get(name)
        if backend is None:
            backend = self._backends[name] = backend_class(name)(BackendOptions(self.litellm_processes))
        return backend

    async def chat(self, model_name: str, messages: list[dict[str, str]], *, seed: int | None = None,
                   request: Request | None = None) -> ChatResponse:
        """One call. ``request``: the typed request the messages express (defaults to ``messages.request``
        for a ``contract.Prompt``); backends that want data read it, real providers never see it."""
        entry = self.registry.get(model_name)
        if request is None:
            request = getattr(messages, "request", None)
        messages = list(messages)  # a plain list: what providers receive and what the cache key hashes
        key = request_key({
            "model": entry.model, "api_base": entry.api_base, "version": entry.version,
            "temperature": entry.temperature, "max_tokens": entry.max_tokens, "seed": seed, "messages": messages,
        })
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            self.stats.cache_hits[model_name] += 1
            return ChatResponse(**{**hit, "cached": True, "latency_s": 0.0, "cost_usd": 0.0, "attempts": 0,
                                   "retried_errors": []})
        backend = self.backend(entry)
        held = self.ledger.reserve(entry, messages) if self.ledger is not None and self.ledger.applies_to(entry) else None
        try:
            response = await self._call(entry, backend, messages, seed, request)
        except BaseException:
            if held is not None:
                self.ledger.release(held)
            raise
        if held is not None:
            self.ledger.settle(held, entry.cost(response.prompt_tokens, response.completion_tokens),
                               response.prompt_tokens, response.completion_tokens)
        self.stats.backend_calls[model_name] += 1
        if self.cache is not None:
            self.cache.put(key, entry.model, response.model_dump(include={"text", "prompt_tokens", "completion_tokens"}))
        return response

    async def _call(self, entry: ModelEntry, backend: ChatBackend, messages: list[dict[str, str]], seed: int | None,
                    request: Request | None) -> ChatResponse:
        """The call itself (no cache, no ledger): in-process for simulated backends, else with retries."""
        if backend.simulated:
            if self.sim_latency_s or entry.requests_per_minute:
                async with self._pool(entry):
                    await self._admit(entry)
                    await asyncio.sleep(self.sim_latency_s)
            call = BackendCall(messages, seed, entry.temperature, entry.max_tokens, request)
            t0 = time.perf_counter()
            done = await backend.complete(entry, call)
            return self._response(entry, done, time.perf_counter() - t0, 1, [])
        api_key = self.registry.api_key(entry.name)  # RegistryError if the variable is unset
        call = BackendCall(messages, seed, entry.temperature, entry.max_tokens, request, api_key,
                           self.policy.timeout_s)
        async with self._pool(entry):
            return await self._with_retries(entry, backend, call)

    @staticmethod
    def _response(entry: ModelEntry, done, latency_s: float, attempts: int, errors: list[str]) -> ChatResponse:
        cost = done.cost_usd if done.cost_usd is not None else entry.cost(done.prompt_tokens, done.completion_tokens)
        return ChatResponse(text=done.text, prompt_tokens=done.prompt_tokens, completion_tokens=done.completion_tokens,
                            cost_usd=cost, latency_s=latency_s, attempts=attempts, retried_errors=errors)

    async def aclose(self) -> None:
        """Close pooled HTTP connections and write pending cache rows; call before the event loop ends."""
        if self.cache is not None:
            self.cache.flush()
        backends, self._backends = list(self._backends.values()), {}
        for backend in backends:
            await backend.aclose()

    async def _with_retries(self, entry: ModelEntry, backend: ChatBackend, call: BackendCall) -> ChatResponse:
        policy = self.policy
        errors: list[str] = []
        for attempt in range(1, policy.max_attempts + 1):
            await self._admit(entry)
            t0 = time.perf_counter()
            try:
                done = await backend.complete(entry, call)
            except Exception as exc:  # noqa: BLE001 - classified below
                error_class, retry_after = classify_exception(exc)
                self.stats.errors[error_class] += 1
                errors.append(error_class)
                if error_class not in RETRYABLE or attempt == policy.max_attempts:
                    raise LLMError(error_class, safe_message(exc, call.api_key), attempt, errors[:-1]) from None
                delay = min(policy.max_delay_s, policy.base_delay_s * 2 ** (attempt - 1))
                delay *= 1 + random.uniform(-policy.jitter, policy.jitter)
                if retry_after is not None:
                    delay = max(delay, min(retry_after, policy.max_delay_s))
                await asyncio.sleep(delay)
                continue
            return self._response(entry, done, time.perf_counter() - t0, attempt, errors)
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


async def run_and_close(gateway: Gateway, coro):
    """Await ``coro`` and close the gateway's pooled connections in the same event loop."""
    try:
        return await coro
    finally:
        await gateway.aclose()
