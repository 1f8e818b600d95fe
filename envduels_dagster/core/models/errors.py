"""One error taxonomy for every backend: provider and client exceptions -> error class + Retry-After.

Why one mapping: the retry policy, the ``incomplete`` episodes and the fatal-error policy all
key on the class, so litellm, the lean client and litellm worker processes must agree on it.
"""

from __future__ import annotations

import asyncio
import email.utils
import time

from envduels_dagster.core.models.types import BackendError


class MalformedResponse(Exception):
    pass


def retry_after_seconds(value: object, now: float | None = None) -> float | None:
    """A ``Retry-After`` header as seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if value is None:
        return None
    text = str(value).strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:  # RFC dates are GMT; a date without a zone is not one
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def safe_message(exc: Exception, api_key: str | None) -> str:
    """Error text with any trace of the key removed (providers sometimes echo it)."""
    text = exc.message if isinstance(exc, BackendError) else f"{type(exc).__name__}: {exc}"[:500]
    if api_key:
        text = text.replace(api_key, "***")
    return text


_BY_NAME = {
    "RateLimitError": "rate_limit", "Timeout": "timeout", "APITimeoutError": "timeout",
    "TimeoutError": "timeout", "InternalServerError": "server_error", "ServiceUnavailableError": "server_error",
    "BadGatewayError": "server_error", "APIConnectionError": "connection_error",
    "AuthenticationError": "auth_error", "PermissionDeniedError": "auth_error",
    "BadRequestError": "bad_request", "NotFoundError": "bad_request", "UnprocessableEntityError": "bad_request",
    "ContextWindowExceededError": "bad_request", "ContentPolicyViolationError": "bad_request",
}


def classify_exception(exc: Exception) -> tuple[str, float | None]:
    """Map provider/client exceptions to our error taxonomy, plus a Retry-After if given."""
    if isinstance(exc, BackendError):  # classified where it happened (a backend, a litellm worker process)
        return exc.error_class, exc.retry_after
    name = type(exc).__name__
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or getattr(exc, "litellm_response_headers", None) or {}
    try:
        retry_after = retry_after_seconds(headers.get("retry-after") or headers.get("Retry-After"))
    except AttributeError:
        retry_after = None
    if isinstance(exc, MalformedResponse) or name in ("MalformedBody", "JSONDecodeError", "APIResponseValidationError"):
        return "malformed_response", None
    if retry_after is None:
        retry_after = getattr(exc, "retry_after", None)
    text = str(exc)
    if "Connection error" in text or "ConnectError" in text or "Cannot connect to host" in text:
        return "connection_error", None  # litellm reports refused connections as InternalServerError
    status = getattr(exc, "status_code", None)
    if name in _BY_NAME:
        return _BY_NAME[name], retry_after
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
