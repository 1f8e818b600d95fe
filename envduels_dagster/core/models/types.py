"""The typed model interface: what the engine asks of a gateway, and what a gateway asks of a backend.

Why Protocols: the engine (authoring, episodes, rounds, studies) needs one method, ``chat``;
anything that provides it (the ``Gateway``, a trained learner in the lift->learning study) can
stand in. A backend (litellm, the lean HTTP client, the simulated models) turns one call into
text, usage and cost, or an error class; the gateway keeps cache, pools, rate limits and
retries, once, for all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel

from envduels_dagster.core.models.contract import AuthorRequest, HardenRequest, SolveRequest

if TYPE_CHECKING:
    from envduels_dagster.core.models.registry import ModelEntry

Request = AuthorRequest | HardenRequest | SolveRequest

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


class BackendError(Exception):
    """One failed attempt, already classified by the backend (or by a litellm worker process)."""

    def __init__(self, error_class: str, retry_after: float | None, message: str):
        super().__init__(message)
        self.error_class, self.retry_after, self.message = error_class, retry_after, message


@dataclass(frozen=True)
class RetryPolicy:
    """How one call is retried. A call spends at most ``deadline_factor x timeout_s`` waiting on the provider
    (each attempt gets what is left of that, at most ``timeout_s``), and at most ``max_timeouts`` of its attempts
    may time out: a hanging provider costs 2 x timeout_s a call, not ``max_attempts`` x timeout_s (issue 33).
    The backoff waits between attempts (each at most ``max_delay_s``) come on top."""

    max_attempts: int = 5
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    timeout_s: float = 60.0
    jitter: float = 0.25
    max_timeouts: int = 2  # a timed-out attempt is retried once; the second timeout ends the call
    deadline_factor: float = 2.0  # time waiting on the provider, across attempts, in units of timeout_s


class ChatResponse(BaseModel):
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0  # the part of completion_tokens spent reasoning (reasoning models; 0 otherwise)
    # Why the provider stopped: "stop", "length" (cut at max_tokens), ... ; None when the provider did not say.
    finish_reason: str | None = None
    cost_usd: float = 0.0
    latency_s: float = 0.0
    attempts: int = 1
    retried_errors: list[str] = []
    cached: bool = False


@dataclass(frozen=True)
class BackendCall:
    """One attempt: messages (exactly what a real provider receives), sampling, seed, the typed request."""

    messages: list[dict[str, str]]
    seed: int | None
    temperature: float
    max_tokens: int
    request: Request | None = None
    api_key: str | None = None
    timeout_s: float = 60.0


@dataclass(frozen=True)
class CallConfig:
    """How one call to a provider is made, apart from its messages and where it goes (the role of inspect-ai's
    ``GenerateConfig``): what both clients (``fast_client``, ``litellm_call``) take instead of ten parameters.

    ``params``: the registry's provider options, passed as given; ``request``: the typed request's wire form,
    for envduels serve-sim endpoints only (``litellm_call.wire_request``); ``max_reply_bytes``: the largest
    reply body read (raw or decompressed). The key is left out of ``repr`` so that a logged config shows none.
    """

    temperature: float = 0.0
    max_tokens: int = 1024
    seed: int | None = None
    timeout_s: float = 60.0
    params: Mapping[str, Any] = field(default_factory=dict)
    max_reply_bytes: int = 8 * 1024 * 1024  # the registry's default (registry.DEFAULT_MAX_REPLY_BYTES)
    request: dict[str, Any] | None = None
    api_key: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None = None  # None: priced with the registry's per-token prices
    reasoning_tokens: int = 0
    finish_reason: str | None = None


@dataclass(frozen=True)
class BackendTraits:
    """What a backend needs from the gateway; the gateway reads these and never asks which backend it is.

    ``needs_key``: read the entry's ``api_key_env`` (a missing variable fails the call). ``retries``: run the
    gateway's retry policy (False: one attempt; a remote provider's transient errors are worth retrying, an
    in-process model's are not). ``imitates_latency``: the gateway's ``sim_latency_s`` applies (a pool slot and a
    sleep before the call, so an in-process model behaves like a slow remote one in demos and resume tests).
    """

    needs_key: bool = True
    retries: bool = True
    imitates_latency: bool = False


REMOTE = BackendTraits()


@dataclass(frozen=True)
class BackendOptions:
    litellm_processes: int = 0  # litellm calls in N worker processes (0: in the event loop's process)


class ChatBackend(Protocol):
    """A way to reach models. Raise ``BackendError`` or any exception ``classify_exception`` maps."""

    #: in-process simulated models (the registry's ``simulated`` column); the gateway reads ``traits`` instead
    simulated: ClassVar[bool]
    #: what the backend needs from the gateway (key, retries, imitated latency)
    traits: ClassVar[BackendTraits]

    def __init__(self, options: BackendOptions) -> None: ...

    async def complete(self, entry: ModelEntry, call: BackendCall) -> Completion: ...

    async def aclose(self) -> None: ...


class ChatGateway(Protocol):
    """What the engine calls: the ``Gateway``, or any stand-in such as a trained learner."""

    async def chat(self, model_name: str, messages: list[dict[str, str]], *, seed: int | None = None,
                   request: Request | None = None) -> ChatResponse: ...

