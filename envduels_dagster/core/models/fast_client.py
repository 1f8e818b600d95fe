"""A lean async client for OpenAI-compatible chat endpoints (vLLM, serve-sim, OpenAI-compatible proxies).

Why: on 2 cores every Python client is CPU-bound against a fast server; litellm
spends ~7.5 ms of client CPU per call, a bare aiohttp call ~0.5 ms. This client
keeps one pooled connection set per event loop, encodes and decodes with orjson,
and raises exceptions that ``errors.classify_exception`` maps onto the same
error taxonomy as the litellm path, so retries, timeouts, usage and results are
identical. It never logs requests, and the key only travels in the header.

Like httpx and aiohttp with ``trust_env``, it honours HTTPS_PROXY / HTTP_PROXY / ALL_PROXY
and NO_PROXY (read when the client first meets an ``api_base``), builds one SSL context per
client (~21 ms each here, so not one per connection; SSL_CERT_FILE / SSL_CERT_DIR apply as
in any OpenSSL client), and reads a ``Retry-After`` given in seconds or as an HTTP date.
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.request
from typing import Any

import aiohttp
import orjson

from envduels_dagster.core.models.errors import retry_after_seconds
from envduels_dagster.core.models.types import CallConfig, Completion

DEFAULT_LIMIT = 8 * 1024 * 1024  # the registry's default max_reply_bytes


class HTTPStatusError(Exception):
    def __init__(self, status_code: int, message: str, retry_after: float | None):
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code
        self.retry_after = retry_after


class MalformedBody(Exception):
    pass


def parse_reply(status: int, retry_after: str | None, raw: bytes) -> Completion:
    """The completion a chat-completions response holds, or the error it means."""
    if status != 200:
        raise HTTPStatusError(status, raw[:300].decode(errors="replace"), retry_after_seconds(retry_after))
    try:
        data = orjson.loads(raw)
        choice = data["choices"][0]
        text = choice["message"]["content"]
        usage = data["usage"]
        tokens = usage["prompt_tokens"], usage["completion_tokens"]
        details = usage.get("completion_tokens_details") or {}
        reasoning = details.get("reasoning_tokens") or 0
        finish = choice.get("finish_reason")
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise MalformedBody(f"unreadable completion body: {type(exc).__name__}") from None
    # Found by tests/flows/test_fuzz_inputs.py: a null content (a tool-call reply) or float/bool token counts
    # used to pass through as a reply of None or truncated counts.
    if not isinstance(text, str):
        raise MalformedBody(f"unreadable completion body: message content is {type(text).__name__}, not text")
    if not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in (*tokens, reasoning)):
        raise MalformedBody(f"unreadable completion body: usage token counts {(*tokens, reasoning)!r} are not counts")
    if finish is not None and not isinstance(finish, str):
        raise MalformedBody(f"unreadable completion body: finish_reason is {type(finish).__name__}, not text")
    return Completion(text, tokens[0], tokens[1], None, min(reasoning, tokens[1]), finish)


def parse_completion(status: int, retry_after: str | None, raw: bytes) -> tuple[str, int, int]:
    """(text, prompt_tokens, completion_tokens) from a chat-completions response, or the error it means."""
    reply = parse_reply(status, retry_after, raw)
    return reply.text, reply.prompt_tokens, reply.completion_tokens


def request_body(model: str, messages, config: CallConfig) -> bytes:
    """The chat-completions body. ``config.request``: the typed request, for envduels serve-sim endpoints only.
    ``config.params``: the registry's provider options, as body fields (an ``extra_body`` mapping is merged in,
    as the OpenAI SDK does)."""
    body: dict[str, Any] = {}
    if config.params:  # first: what the engine sets below always wins (the registry refuses those names anyway)
        options = dict(config.params)
        body.update(options.pop("extra_body", None) or {})
        body.update(options)
    body.update(model=model, messages=messages, temperature=config.temperature, max_tokens=config.max_tokens)
    if config.seed is not None:
        body["seed"] = config.seed
    if config.request is not None:
        from envduels_dagster.core.models.contract import WIRE_FIELD

        body[WIRE_FIELD] = config.request
    return orjson.dumps(body)


def too_large(limit: int, seen: int | None = None) -> MalformedBody:
    size = f" ({seen} bytes and more)" if seen is not None else ""
    return MalformedBody(f"reply body over max_reply_bytes = {limit}{size}: refused unread (raise max_reply_bytes "
                         "if the provider really sends such replies)")


def inflate(raw: bytes, encoding: str, limit: int) -> bytes:
    """``raw`` decompressed (gzip or deflate), never beyond ``limit`` bytes: a gzip bomb stops at the cap."""
    if encoding not in ("gzip", "deflate"):
        return raw
    import zlib

    inflater = zlib.decompressobj(47)  # gzip or zlib header, detected
    try:
        out = inflater.decompress(raw, limit + 1)
    except zlib.error:
        raise MalformedBody("undecodable compressed body") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise too_large(limit, len(out))
    return out


def proxy_for(url: str) -> str | None:
    """The proxy the environment sets for ``url`` (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY), as httpx does."""
    proxies = urllib.request.getproxies_environment()
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0].rsplit("@", 1)[-1]
    if not proxies or urllib.request.proxy_bypass_environment(host, proxies):  # type: ignore[attr-defined]  # public, unstubbed
        return None
    return proxies.get(scheme.lower()) or proxies.get("all")


class FastClient:
    """One aiohttp session (connection pool) for the event loop it was first used in.

    With ``httptools`` importable (it comes with ``uvicorn[standard]``, a dependency of
    dagster-webserver) the requests go through ``_H1Pool`` instead: HTTP/1.1 keep-alive
    connections on asyncio protocols parsed by httptools (llhttp), ~0.15 ms of CPU per
    call against ~0.4 ms for aiohttp. Same requests, same replies, same exceptions.
    """

    def __new__(cls, *args, **kwargs):
        if cls is FastClient and _httptools_available():
            return super().__new__(H1Client)
        return super().__new__(cls)

    def __init__(self, limit: int = 256):
        self._limit = limit
        self._session: aiohttp.ClientSession | None = None
        self._ssl_context: ssl.SSLContext | None = None

    def ssl_context(self) -> ssl.SSLContext:
        """The client's one SSL context (verifying, system trust store), built on first use."""
        if self._ssl_context is None:
            self._ssl_context = ssl.create_default_context()
        return self._ssl_context

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._limit, ttl_dns_cache=300, ssl=self.ssl_context())
            self._session = aiohttp.ClientSession(connector=connector, trust_env=True,
                                                  json_serialize=lambda o: orjson.dumps(o).decode())
        return self._session

    async def chat(self, api_base: str, model: str, messages, config: CallConfig) -> Completion:
        """The completion; raises HTTPStatusError, MalformedBody (also for a body over ``config.max_reply_bytes``,
        raw or decompressed, refused before it is read whole), timeouts (``config.timeout_s``), OSError."""
        data = request_body(model, messages, config)
        max_reply_bytes = config.max_reply_bytes
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {config.api_key or 'no-key'}"}
        url = api_base.rstrip("/") + "/chat/completions"
        session = self._get_session()
        async with asyncio.timeout(config.timeout_s):
            async with session.post(url, data=data, headers=headers) as resp:
                if (resp.content_length or 0) > max_reply_bytes:
                    raise too_large(max_reply_bytes, resp.content_length)
                chunks, size = [], 0
                async for chunk in resp.content.iter_any():  # decompressed chunk by chunk (auto_decompress)
                    size += len(chunk)
                    if size > max_reply_bytes:
                        raise too_large(max_reply_bytes, size)
                    chunks.append(chunk)
                raw = b"".join(chunks)
                status, retry_after = resp.status, resp.headers.get("Retry-After")
        return parse_reply(status, retry_after, raw)

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


# --------------------------------------------------------------------------- HTTP/1.1 over httptools


def _httptools_available() -> bool:
    try:
        import httptools  # noqa: F401
    except ImportError:
        return False
    return True


class _H1Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; one request at a time."""

    def __init__(self) -> None:
        import httptools

        self.limit = DEFAULT_LIMIT  # the largest body accepted (set per request)
        self._size = 0
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future | None = None
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._complete = False
        self._keep_alive = False

    # asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        import httptools

        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ConnectionError(f"unreadable HTTP response: {exc}"))
            self.close()

    def connection_lost(self, exc) -> None:
        self.closed = True
        self._fail(ConnectionResetError("the server closed the connection"))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self._keep_alive = self._parser.should_keep_alive()  # llhttp forgets it once the message ends
        length = self._headers.get("content-length", "")
        if length.isdigit() and int(length) > self.limit:  # refused before a byte of the body is read
            self._refuse(int(length))

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > self.limit:
            self._refuse(self._size)
            return
        self._body.append(body)

    def _refuse(self, seen: int) -> None:
        """A body over the limit: fail the request and drop the connection (the rest is never read)."""
        self._fail(too_large(self.limit, seen))
        self._body = []
        self.close()

    def on_message_complete(self) -> None:
        self._complete = True
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result((self._parser.get_status_code(), self._headers, b"".join(self._body)))

    def _fail(self, exc: Exception) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    async def request(self, head: bytes, body: bytes, limit: int = DEFAULT_LIMIT) -> tuple[int, dict[str, str], bytes]:
        self._headers, self._body, self._complete, self._keep_alive = {}, [], False, False
        self.limit, self._size = limit, 0
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(head + body)
        return await self._waiter

    @property
    def reusable(self) -> bool:
        return not self.closed and self._complete and self._keep_alive

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class H1Client(FastClient):
    """``FastClient`` over pooled ``_H1Connection``s (one pool per event loop)."""

    def __init__(self, limit: int = 256):
        super().__init__(limit)  # the aiohttp session serves endpoints reached through a proxy
        self._idle: dict[tuple, list[_H1Connection]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._targets: dict[str, tuple] = {}

    def _target(self, api_base: str) -> tuple:
        target = self._targets.get(api_base)
        if target is None:
            import httptools

            url = httptools.parse_url(api_base.rstrip("/").encode() + b"/chat/completions")
            scheme, host = url.schema.decode().lower(), url.host.decode()
            if scheme not in ("http", "https"):
                raise ValueError(f"unsupported scheme in api_base {api_base!r}")
            port = url.port or (443 if scheme == "https" else 80)
            path = url.path.decode() + (f"?{url.query.decode()}" if url.query else "")
            host_header = host if url.port is None else f"{host}:{port}"
            proxied = proxy_for(api_base) is not None
            target = self._targets[api_base] = (scheme, host, port, path, host_header, proxied)
        return target

    async def _connect(self, scheme: str, host: str, port: int) -> _H1Connection:
        ssl_context = self.ssl_context() if scheme == "https" else None
        _, conn = await asyncio.get_running_loop().create_connection(
            _H1Connection, host, port, ssl=ssl_context, server_hostname=host if ssl_context else None)
        return conn

    async def chat(self, api_base: str, model: str, messages, config: CallConfig) -> Completion:
        scheme, host, port, path, host_header, proxied = self._target(api_base)
        if proxied:  # proxies (CONNECT tunnels, absolute-form requests) are aiohttp's job
            return await super().chat(api_base, model, messages, config)
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # connections belong to the loop that opened them
            self._idle, self._loop = {}, loop
        data = request_body(model, messages, config)
        max_reply_bytes = config.max_reply_bytes
        head = (f"POST {path} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: envduels\r\n"
                f"Content-Type: application/json\r\nAuthorization: Bearer {config.api_key or 'no-key'}\r\n"
                f"Content-Length: {len(data)}\r\n\r\n").encode("latin-1")
        idle = self._idle.setdefault((scheme, host, port), [])
        conn = None
        try:
            async with asyncio.timeout(config.timeout_s):
                while idle and conn is None:
                    candidate = idle.pop()
                    conn = None if candidate.closed else candidate
                if conn is None:
                    conn = await self._connect(scheme, host, port)
                status, headers, raw = await conn.request(head, data, max_reply_bytes)
        except BaseException:
            if conn is not None:
                conn.close()  # an unfinished exchange: the connection cannot be reused
            raise
        if conn.reusable and len(idle) < self._limit:
            idle.append(conn)
        else:
            conn.close()
        raw = inflate(raw, headers.get("content-encoding", "identity").lower(), max_reply_bytes)
        return parse_reply(status, headers.get("retry-after"), raw)

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle = {}
        await super().aclose()
