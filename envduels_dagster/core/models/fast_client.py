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
from envduels_dagster.core.models.types import BackendError, CallConfig, Completion

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
    return reply_completion(reply_json(status, retry_after, raw))


def reply_json(status: int, retry_after: str | None, raw: bytes) -> dict[str, Any]:
    """A 200 reply's JSON object, or the error a reply means (HTTPStatusError for any other status)."""
    if status != 200:
        raise HTTPStatusError(status, raw[:300].decode(errors="replace"), retry_after_seconds(retry_after))
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise MalformedBody("unreadable completion body: JSONDecodeError") from None
    if not isinstance(data, dict):
        raise MalformedBody(f"unreadable completion body: a JSON {type(data).__name__}, not an object")
    return data


def reply_completion(data: dict[str, Any]) -> Completion:
    """The completion an OpenAI-format chat-completions object holds (MalformedBody if it holds none)."""
    try:
        choice = data["choices"][0]
        text = choice["message"]["content"]
        usage = data["usage"]
        tokens = usage["prompt_tokens"], usage["completion_tokens"]
        details = usage.get("completion_tokens_details") or {}
        reasoning = details.get("reasoning_tokens") or 0
        finish = choice.get("finish_reason")
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
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


def check_headers(headers: dict[str, str]) -> None:
    """Refuse a header name or value with a line break (it would end the header early; a key read from a variable
    with a trailing newline): a fatal bad_request, nothing sent, the value not shown."""
    for name, value in headers.items():
        if any(c in name or c in value for c in "\r\n"):
            raise BackendError("bad_request", None, f"request header {name.strip()!r} holds a line break: not sent "
                               "(a key's variable with a trailing newline? check the variable api_key_env names)")


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
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {config.api_key or 'no-key'}"}
        status, reply_headers, raw = await self.post(api_base.rstrip("/") + "/chat/completions", headers,
                                                     request_body(model, messages, config), config.max_reply_bytes,
                                                     config.timeout_s)
        return parse_reply(status, reply_headers.get("retry-after"), raw)

    async def post(self, url: str, headers: dict[str, str], data: bytes, max_reply_bytes: int,
                   timeout_s: float) -> tuple[int, dict[str, str], bytes]:
        """POST ``data`` to ``url``: (status, headers with lower-case names, body), the body decompressed and
        refused (MalformedBody) past ``max_reply_bytes``; any status is returned, not raised. What ``chat`` sends
        with, and what sends the requests litellm formats (``litellm_lean``)."""
        check_headers(headers)
        session = self._get_session()
        async with asyncio.timeout(timeout_s):
            async with session.post(url, data=data, headers=headers) as resp:
                if (resp.content_length or 0) > max_reply_bytes:
                    raise too_large(max_reply_bytes, resp.content_length)
                chunks, size = [], 0
                async for chunk in resp.content.iter_any():  # decompressed chunk by chunk (auto_decompress)
                    size += len(chunk)
                    if size > max_reply_bytes:
                        raise too_large(max_reply_bytes, size)
                    chunks.append(chunk)
                return resp.status, {k.lower(): v for k, v in resp.headers.items()}, b"".join(chunks)

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

    def _target(self, url: str) -> tuple:
        target = self._targets.get(url)
        if target is None:
            import httptools

            parsed = httptools.parse_url(url.encode())
            scheme, host = parsed.schema.decode().lower(), parsed.host.decode()
            if scheme not in ("http", "https"):
                raise ValueError(f"unsupported scheme in api_base {url!r}")
            port = parsed.port or (443 if scheme == "https" else 80)
            path = parsed.path.decode() + (f"?{parsed.query.decode()}" if parsed.query else "")
            host_header = host if parsed.port is None else f"{host}:{port}"
            proxied = proxy_for(url) is not None
            target = self._targets[url] = (scheme, host, port, path, host_header, proxied)
        return target

    async def _connect(self, scheme: str, host: str, port: int) -> _H1Connection:
        ssl_context = self.ssl_context() if scheme == "https" else None
        _, conn = await asyncio.get_running_loop().create_connection(
            _H1Connection, host, port, ssl=ssl_context, server_hostname=host if ssl_context else None)
        return conn

    async def post(self, url: str, headers: dict[str, str], data: bytes, max_reply_bytes: int,
                   timeout_s: float) -> tuple[int, dict[str, str], bytes]:
        scheme, host, port, path, host_header, proxied = self._target(url)
        if proxied:  # proxies (CONNECT tunnels, absolute-form requests) are aiohttp's job
            return await super().post(url, headers, data, max_reply_bytes, timeout_s)
        check_headers(headers)
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # connections belong to the loop that opened them
            self._idle, self._loop = {}, loop
        lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        agent = "" if any(name.lower() == "user-agent" for name in headers) else "User-Agent: envduels\r\n"
        head = (f"POST {path} HTTP/1.1\r\nHost: {host_header}\r\n{agent}{lines}"
                f"Content-Length: {len(data)}\r\n\r\n").encode("latin-1")
        idle = self._idle.setdefault((scheme, host, port), [])
        conn = None
        try:
            async with asyncio.timeout(timeout_s):
                while idle and conn is None:
                    candidate = idle.pop()
                    conn = None if candidate.closed else candidate
                if conn is None:
                    conn = await self._connect(scheme, host, port)
                status, reply_headers, raw = await conn.request(head, data, max_reply_bytes)
        except BaseException:
            if conn is not None:
                conn.close()  # an unfinished exchange: the connection cannot be reused
            raise
        if conn.reusable and len(idle) < self._limit:
            idle.append(conn)
        else:
            conn.close()
        return status, reply_headers, inflate(raw, reply_headers.get("content-encoding", "identity").lower(),
                                              max_reply_bytes)

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle = {}
        await super().aclose()
