"""Compatibility path: the gateway moved to ``envduels_dagster.core.models``.

Why it stays for now: sibling branches (the Dagster areas, the thin assets) still import
``core.gateway`` while they move; new code imports ``core.models``. Remove once they merged.
"""

from envduels_dagster.core.models import (  # noqa: F401 - re-exports
    FATAL,
    RETRYABLE,
    ChatResponse,
    Gateway,
    GatewayStats,
    LLMError,
    MalformedResponse,
    RateLimiter,
    RetryPolicy,
    classify_exception,
    run_and_close,
)
