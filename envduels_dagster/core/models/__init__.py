"""Model calls: a typed interface (``types``), a request contract (``contract``), a registry of
backends by model-string prefix (``providers``) and one ``Gateway`` with cache, pools, rate limits
and retries. Why a package: each part changes for its own reasons (a new provider, a new kind of
request, a retry policy) and should be readable on its own. See docs/ARCHITECTURE.md.
"""

from envduels_dagster.core.models.contract import (
    AuthorRequest,
    HardenRequest,
    PeerRates,
    Prompt,
    SolveRequest,
)
from envduels_dagster.core.models.errors import MalformedResponse, classify_exception
from envduels_dagster.core.models.gateway import Gateway, GatewayStats, run_and_close
from envduels_dagster.core.models.limits import MemoryLimiter, ProviderLimiter, open_limiter
from envduels_dagster.core.models.providers import UnknownProviderError
from envduels_dagster.core.models.types import (
    FATAL,
    RETRYABLE,
    BackendCall,
    BackendError,
    BackendOptions,
    ChatBackend,
    ChatGateway,
    ChatResponse,
    Completion,
    LLMError,
    RetryPolicy,
)

__all__ = [
    "FATAL", "RETRYABLE", "AuthorRequest", "BackendCall", "BackendError", "BackendOptions", "ChatBackend",
    "ChatGateway", "ChatResponse", "Completion", "Gateway", "GatewayStats", "HardenRequest", "LLMError",
    "MalformedResponse", "MemoryLimiter", "PeerRates", "Prompt", "ProviderLimiter", "RetryPolicy", "SolveRequest",
    "UnknownProviderError", "classify_exception", "open_limiter", "run_and_close",
]
