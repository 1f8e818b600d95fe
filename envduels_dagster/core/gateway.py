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
                 sim_latency_s: float = 0.0):
        self.registry = registry
        self.cache = cache
        self.policy = policy or RetryPolicy()
        self.sim_latency_s = sim_latency_s  # makes simulated models behave like slow providers (demos, tests)
        self.stats = GatewayStats()
        self._pools: dict[str, asyncio.Semaphore] = {}
        self._limiters: dict[str, RateLimiter] = {}
        self._fast_client = None
        self._sims: dict[str, Any] = {}

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
        """Close pooled HTTP connections; call before the event loop ends."""
        if self._fast_client is not None:
            await self._fast_client.aclose()

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
                else:
                    text, pt, ct, cost = await _litellm_call(entry, messages, seed, api_key, policy.timeout_s)
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
    text = f"{type(exc).__name__}: {exc}"[:500]
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


async def _litellm_call(entry: ModelEntry, messages, seed, api_key, timeout_s):
    litellm = _litellm_module()
    kwargs: dict[str, Any] = dict(model=entry.model, messages=messages, temperature=entry.temperature,
                                  max_tokens=entry.max_tokens, timeout=timeout_s, max_retries=0)
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
    if not (entry.input_cost_per_mtok or entry.output_cost_per_mtok):
        try:
            cost = float(litellm.completion_cost(completion_response=response))
        except Exception:  # noqa: BLE001 - unknown models have no price; fall back to registry prices (0)
            cost = None
    return text, pt, ct, cost


class MalformedResponse(Exception):
    pass


def classify_exception(exc: Exception) -> tuple[str, float | None]:
    """Map provider/client exceptions to our error taxonomy, plus a Retry-After if given."""
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
