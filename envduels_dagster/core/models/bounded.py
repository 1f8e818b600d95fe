"""Bounded replies on the litellm path: a body over ``max_reply_bytes``, raw or inflated, is refused unread.

Why at the transport: litellm reads every provider's reply through httpx (its own handler and the
OpenAI SDK alike), over ``httpx.AsyncHTTPTransport`` or litellm's aiohttp transport, and httpx reads a
non-streamed body whole and inflates it whole. A provider answering 200 with 512 MB, or a 1 MB gzip
body inflating to 1 GiB, took the orchestrator to 1.6-2.1 GB (issue 31). So both transports' responses
pass through :func:`bounded`: a ``Content-Length`` over the cap fails at once; otherwise the body is
counted as it arrives and inflated here, chunk by chunk, never past the cap (httpx then sees an identity
body). The cap comes from a context variable that ``litellm_call`` sets for its own call only; other httpx
users of the process are untouched. The SDKs turn the refusal into a connection error with their own
text, so the call also records it in that variable and ``litellm_call`` raises it as a malformed reply.
"""

from __future__ import annotations

import contextvars
import zlib
from typing import Any

REPLY_CAP: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("envduels_reply_cap", default=None)
_INSTALLED: set[type] = set()


class ReplyTooLarge(Exception):
    def __init__(self, limit: int, seen: int):
        super().__init__(f"reply body over max_reply_bytes = {limit} ({seen} bytes and more): refused unread "
                         "(raise max_reply_bytes if the provider really sends such replies)")


def _refuse(box: dict[str, Any], seen: int) -> ReplyTooLarge:
    exc = ReplyTooLarge(box["limit"], seen)
    box["refused"] = str(exc)
    return exc


def bounded(response, box: dict[str, Any]):
    """``response`` (an ``httpx.Response`` fresh from a transport) with its body capped at ``box['limit']``."""
    import httpx

    limit = box["limit"]
    length = response.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise _refuse(box, int(length))
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    inflater = zlib.decompressobj(47) if encoding in ("gzip", "deflate") else None
    raw_stream = response.stream

    class Capped(httpx.AsyncByteStream):
        async def __aiter__(self):
            raw = out = 0
            async for chunk in raw_stream:
                raw += len(chunk)
                if raw > limit:
                    raise _refuse(box, raw)
                if inflater is not None:
                    try:
                        chunk = inflater.decompress(chunk, limit - out + 1)
                    except zlib.error:
                        raise httpx.DecodingError("undecodable compressed body") from None
                    if inflater.unconsumed_tail:
                        raise _refuse(box, out + len(chunk) + len(inflater.unconsumed_tail))
                out += len(chunk)
                if out > limit:
                    raise _refuse(box, out)
                yield chunk

        async def aclose(self) -> None:
            await raw_stream.aclose()

    headers = response.headers.copy()
    if inflater is not None:  # inflated here: httpx must not inflate it again
        del headers["content-encoding"]
        headers.pop("content-length", None)
    return httpx.Response(status_code=response.status_code, headers=headers, stream=Capped(),
                          request=response.request, extensions=response.extensions)


def install(transport_class: Any) -> None:
    """Cap the replies of ``transport_class`` (an httpx async transport) during calls that set ``REPLY_CAP``."""
    if transport_class in _INSTALLED:
        return
    original = transport_class.handle_async_request

    async def handle_async_request(self, request):
        response = await original(self, request)
        box = REPLY_CAP.get()
        return response if box is None else bounded(response, box)

    transport_class.handle_async_request = handle_async_request
    _INSTALLED.add(transport_class)


def install_for_litellm() -> None:
    """Both transports litellm may read replies through."""
    import httpx

    install(httpx.AsyncHTTPTransport)
    try:
        from litellm.llms.custom_httpx.aiohttp_transport import LiteLLMAiohttpTransport
    except ImportError:  # a litellm without its aiohttp transport
        return
    install(LiteLLMAiohttpTransport)
