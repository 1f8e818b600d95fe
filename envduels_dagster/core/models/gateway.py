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
import dataclasses
import random
import time
from collections import Counter
from dataclasses import dataclass, field

from envduels_dagster.core.models.call_cache import CallCache, request_key
from envduels_dagster.core.models.errors import classify_exception, safe_message
from envduels_dagster.core.models.in_flight import LEASE_MARGIN_S, InFlight, slot_store_for
from envduels_dagster.core.models.limits import MemoryLimiter, ProviderLimiter
from envduels_dagster.core.models.providers import UnknownProviderError, backend_class, backend_name
from envduels_dagster.core.models.registry import ModelEntry, Registry
from envduels_dagster.core.models.types import (
    REMOTE,
    RETRYABLE,
    BackendCall,
    BackendError,
    BackendOptions,
    BackendTraits,
    ChatBackend,
    ChatResponse,
    Completion,
    LLMError,
    Request,
    RetryPolicy,
)


@dataclass
class GatewayStats:
    """Counters for progress reporting and tests (backend_calls excludes cache hits)."""

    backend_calls: Counter = field(default_factory=Counter)
    cache_hits: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)


class Gateway:
    def __init__(self, registry: Registry, cache: CallCache | None = None, policy: RetryPolicy | None = None,
                 sim_latency_s: float = 0.0, litellm_processes: int = 0, ledger=None,
                 limiter: ProviderLimiter | None = None):
        self.registry = registry
        # core/budget.BudgetLedger or None: consulted before every call that costs money (a cache miss of a
        # priced model) when a cap is set; a call that would pass a cap raises BudgetExhausted, unmade.
        self.ledger = ledger
        # litellm spends ~8-10 ms of CPU per call: one event loop tops out near 100 calls/s. With
        # N > 0, litellm calls run in N worker processes instead (ENVDUELS_LITELLM_PROCESSES: the callers pass it).
        self.litellm_processes = max(0, litellm_processes)
        self.cache = cache
        self.policy = policy or RetryPolicy()
        self.sim_latency_s = sim_latency_s  # makes in-process models behave like slow providers (demos, tests)
        # Requests/tokens per minute and 429 holds, per pool, shared with every gateway opening the same
        # storage (limits.py); memory when none is given (one gateway's calls only).
        self.limiter: ProviderLimiter = limiter if limiter is not None else MemoryLimiter()
        # A registry's max_in_flight, held in the same storage across every run and process (in_flight.py);
        # None without shared storage: then the pool's semaphore below holds it for this gateway's calls.
        store = slot_store_for(self.limiter)
        self.in_flight: InFlight | None = InFlight(store) if store is not None else None
        self.stats = GatewayStats()
        self._pools: dict[str, asyncio.Semaphore] = {}
        self._held: set[str] = set()  # pools a 429 held: consulted from then on even without rpm/tpm
        self._backends: dict[str, ChatBackend] = {}
        self._routes: dict[str, str] = {}  # model name -> backend name

    def _pool(self, entry: ModelEntry) -> asyncio.Semaphore:
        if entry.provider not in self._pools:
            # one pool per provider for every pair the run plays at once (issue 35)
            self._pools[entry.provider] = asyncio.Semaphore(entry.max_in_flight or entry.max_concurrency)
        return self._pools[entry.provider]

    async def _admit(self, entry: ModelEntry, tokens: int) -> bool:
        """Wait for the pool's slot in the shared schedule, if the registry sets limits or a 429 held the pool.

        Returns whether a reservation was made (its tokens are settled after the reply)."""
        if not (entry.requests_per_minute or entry.tokens_per_minute or entry.provider in self._held):
            return False
        # Headroom under the provider's own window (issue 44): spaced at exactly 60 / rpm, a call that starts a
        # few milliseconds early meets a provider bucket not yet refilled (19 rate-limit errors in 30 calls at
        # 40 rpm, serve-sim --rpm 40); at LIMIT_HEADROOM of the limit, none (docs/RELIABILITY.md).
        rpm = entry.requests_per_minute * LIMIT_HEADROOM if entry.requests_per_minute else None
        tpm = entry.tokens_per_minute * LIMIT_HEADROOM if entry.tokens_per_minute else None
        slot = 60.0 / rpm if rpm else 0.0
        for _ in range(LATE_RESERVATIONS):
            wait = self.limiter.reserve(entry.provider, rpm, tpm, tokens)
            due = time.monotonic() + wait
            if wait > 0:
                await asyncio.sleep(wait)
            # Woken more than a slot late (a starved event loop): going now would bunch with the calls due
            # after ours, a burst the provider answers with 429s. Give the slot up and take the next free one.
            if time.monotonic() - due <= max(LATE_TOLERANCE_S, slot):
                break
        return True

    def _hold(self, entry: ModelEntry, seconds: float) -> None:
        """A 429: no call of the pool starts for ``seconds``, in this gateway or any other sharing the limiter."""
        self._held.add(entry.provider)
        self.limiter.hold(entry.provider, seconds)

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

    def timeout_s(self, entry: ModelEntry) -> float:
        """The call timeout: the entry's own ``timeout_s`` when the registry sets it, else the policy's."""
        return entry.timeout_s if "timeout_s" in entry.model_fields_set else self.policy.timeout_s

    async def chat(self, model_name: str, messages: list[dict[str, str]], *, seed: int | None = None,
                   request: Request | None = None) -> ChatResponse:
        """One call. ``request``: the typed request the messages express (defaults to ``messages.request``
        for a ``contract.Prompt``); backends that want data read it, real providers never see it."""
        entry = self.registry.get(model_name)
        if request is None:
            request = getattr(messages, "request", None)
        messages = list(messages)  # a plain list: what providers receive and what the cache key hashes
        fields = {"model": entry.model, "api_base": entry.api_base, "version": entry.version,
                  "temperature": entry.temperature, "max_tokens": entry.max_tokens, "seed": seed, "messages": messages}
        if entry.params:  # only when set: the keys of calls without params stay as they were
            fields["params"] = entry.params
        key = request_key(fields)
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
            self.ledger.settle(held, entry.cost(response.prompt_tokens, response.completion_tokens,
                                                response.reasoning_tokens),
                               response.prompt_tokens, response.completion_tokens)
        self.stats.backend_calls[model_name] += 1
        if self.cache is not None:
            self.cache.put(key, entry.model, response.model_dump(include=CACHED_FIELDS, exclude_defaults=True)
                           | {"text": response.text})
        return response

    async def _call(self, entry: ModelEntry, backend: ChatBackend, messages: list[dict[str, str]], seed: int | None,
                    request: Request | None) -> ChatResponse:
        """The call itself (no cache, no ledger), with the retries and limits the backend's traits ask for."""
        traits = getattr(backend, "traits", REMOTE)
        api_key = self.registry.api_key(entry.name) if traits.needs_key else None  # RegistryError if unset
        call = BackendCall(messages, seed, entry.temperature, entry.max_tokens, request, api_key, self.timeout_s(entry))
        if traits.imitates_latency and not (self.sim_latency_s or entry.requests_per_minute
                                            or entry.tokens_per_minute):
            return await self._with_retries(entry, backend, call, traits)  # no pool to imitate, none to hold
        async with self._pool(entry):
            return await self._with_retries(entry, backend, call, traits)

    @staticmethod
    def _response(entry: ModelEntry, done: Completion, latency_s: float, attempts: int,
                  errors: list[str]) -> ChatResponse:
        # The backend's price (litellm's map) unless the registry prices reasoning apart, which litellm cannot.
        if done.cost_usd is not None and entry.reasoning_cost_per_mtok is None:
            cost = done.cost_usd
        else:
            cost = entry.cost(done.prompt_tokens, done.completion_tokens, done.reasoning_tokens)
        return ChatResponse(text=done.text, prompt_tokens=done.prompt_tokens, completion_tokens=done.completion_tokens,
                            reasoning_tokens=done.reasoning_tokens, finish_reason=done.finish_reason,
                            cost_usd=cost, latency_s=latency_s, attempts=attempts, retried_errors=errors)

    async def aclose(self) -> None:
        """Close pooled HTTP connections and write pending cache rows; call before the event loop ends."""
        if self.cache is not None:
            self.cache.flush()
        if self.in_flight is not None:
            await self.in_flight.aclose()
        backends, self._backends = list(self._backends.values()), {}
        for backend in backends:
            await backend.aclose()

    async def _with_retries(self, entry: ModelEntry, backend: ChatBackend, call: BackendCall,
                            traits: BackendTraits) -> ChatResponse:
        policy = self.policy
        max_attempts = policy.max_attempts if traits.retries else 1
        estimate = prompt_token_estimate(call.messages)
        errors: list[str] = []
        budget = policy.deadline_factor * call.timeout_s  # time waiting on the provider, all attempts together
        # the account's max_in_flight across runs and processes: a slot per attempt (not held over a backoff)
        shared = self.in_flight if entry.max_in_flight and not traits.imitates_latency else None
        for attempt in range(1, max_attempts + 1):
            this = call if budget >= call.timeout_s else dataclasses.replace(call, timeout_s=budget)
            ticket = await shared.acquire(entry.provider, entry.max_in_flight or 1,
                                          this.timeout_s + LEASE_MARGIN_S) if shared is not None else None
            try:
                reserved = await self._admit(entry, estimate)  # then the rate schedule, holding the slot
                if traits.imitates_latency and self.sim_latency_s:
                    await asyncio.sleep(self.sim_latency_s)
            except BaseException:
                if shared is not None and ticket is not None:
                    shared.release(entry.provider, ticket)
                raise
            t0 = time.perf_counter()
            try:
                try:
                    done = await backend.complete(entry, this)
                finally:
                    if shared is not None and ticket is not None:
                        shared.release(entry.provider, ticket)
            except Exception as exc:  # noqa: BLE001 - classified below
                if not traits.retries and not isinstance(exc, BackendError):
                    raise  # an in-process model's bug is a bug, not a provider failure
                budget -= min(time.perf_counter() - t0, this.timeout_s)  # a late wake-up is our loop's, not theirs
                error_class, retry_after = classify_exception(exc)
                self.stats.errors[error_class] += 1
                errors.append(error_class)
                out_of_time = _out_of_time(policy, call.timeout_s, budget, errors)
                if error_class not in RETRYABLE or attempt == max_attempts or out_of_time:
                    if error_class == "rate_limit":
                        self._hold(entry, min(retry_after or policy.base_delay_s, policy.max_delay_s))
                    raise LLMError(error_class, safe_message(exc, call.api_key) + out_of_time, attempt,
                                   errors[:-1]) from None
                delay = min(policy.max_delay_s, policy.base_delay_s * 2 ** (attempt - 1))
                delay *= 1 + random.uniform(-policy.jitter, policy.jitter)
                if retry_after is not None:
                    delay = max(delay, min(retry_after, policy.max_delay_s))
                if error_class == "rate_limit":  # the account is over its limit: hold every call of the pool
                    self._hold(entry, delay)
                await asyncio.sleep(delay)
                continue
            if reserved and entry.tokens_per_minute:
                used = done.prompt_tokens + done.completion_tokens
                if used != estimate:
                    self.limiter.settle(entry.provider, entry.tokens_per_minute * LIMIT_HEADROOM, used - estimate)
            return self._response(entry, done, time.perf_counter() - t0, attempt, errors)
        raise AssertionError("unreachable")


def _out_of_time(policy: RetryPolicy, timeout_s: float, budget: float, errors: list[str]) -> str:
    """Why no further attempt is made within the call's deadline (RetryPolicy), or "" when one may be."""
    timeouts = errors.count("timeout")
    if errors[-1] == "timeout" and timeouts >= policy.max_timeouts:
        return (f"; gave up after {timeouts} timed-out attempts (timeout_s {timeout_s:g}, at most "
                f"{policy.max_timeouts} per call)")
    if budget < MIN_ATTEMPT_FRACTION * timeout_s:
        return (f"; gave up: the call's deadline ({policy.deadline_factor:g} x timeout_s = "
                f"{policy.deadline_factor * timeout_s:g} s waiting on the provider) is spent")
    return ""


MIN_ATTEMPT_FRACTION = 0.05  # an attempt with less than this share of timeout_s left is not started


LIMIT_HEADROOM = 0.9  # the share of a registry's requests/tokens per minute the limiter schedules
LATE_RESERVATIONS = 3  # a call woken late gives its slot up at most this often, then goes
LATE_TOLERANCE_S = 0.05

# What the call cache keeps of a response (the rest is per call: latency, attempts, cost of a hit is 0).
CACHED_FIELDS = {"text", "prompt_tokens", "completion_tokens", "reasoning_tokens", "finish_reason"}


def prompt_token_estimate(messages: list[dict[str, str]]) -> int:
    """The prompt's tokens before the provider counts them (~4 characters a token), for the token schedule."""
    return sum(len(str(m.get("content", ""))) for m in messages) // 4 + 4 * len(messages)


async def run_and_close(gateway: Gateway, coro):
    """Await ``coro`` and close the gateway's pooled connections in the same event loop."""
    try:
        return await coro
    finally:
        await gateway.aclose()
