"""``envduels serve-sim``: the simulated models behind an OpenAI-compatible HTTP API.

Why: real providers are unreachable from these machines, yet the litellm path
(and any OpenAI client) must be exercised for real. This server answers
``/v1/models`` and ``/v1/chat/completions`` (plain and streaming, with usage)
with exactly the replies the in-process simulated models give, and can inject
the failures real providers produce: 429 with Retry-After, 500, timeouts and
malformed bodies. As a provider account would, it can hold a requests-per-minute limit (429 with
Retry-After past it), answer after a latency drawn from a distribution, reply as a reasoning model
(``reasoning_content``, reasoning tokens in usage, ``finish_reason: length`` past ``max_tokens``), or
misbehave (``--hostile``: a 512 MB body, a gzip bomb). It never logs request bodies or Authorization headers. The engine's typed
request arrives in the body field ``envduels_request`` from clients whose registry entry sets
``request_contract: true``; without it a conversation is played as a game.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import time
import uuid
from dataclasses import dataclass

from aiohttp import web

from envduels_dagster.core.models.contract import WIRE_FIELD, from_wire
from envduels_dagster.sim.model import SimulatedModel, estimate_usage
from envduels_dagster.sim.profiles import PROFILES

FAULTS = ("rate_limit", "server_error", "timeout", "malformed")
HOSTILE = ("huge", "gzip-bomb")
HUGE_BYTES = 512 * 1024 * 1024  # what --hostile huge streams (no Content-Length)
BOMB_BYTES = 1024 * 1024 * 1024  # what --hostile gzip-bomb inflates to (~1 MB on the wire)
# Body fields of a standard chat request; anything else a client sends is a provider option (GET /health shows
# the last request's, never the messages or headers).
STANDARD_FIELDS = frozenset({"model", "messages", "temperature", "max_tokens", "seed", "stream", "stream_options",
                             WIRE_FIELD})


@dataclass
class ServerConfig:
    latency_ms: float = 0.0
    fault_rate: float = 0.0
    seed: int = 0
    timeout_fault_s: float = 30.0  # how long a "timeout" fault hangs before answering 504
    api_key: str | None = None  # when set, requests must carry it as a Bearer token
    rpm: float | None = None  # the account's requests-per-minute limit: past it, 429 with Retry-After
    rpm_burst: float | None = None  # requests the bucket holds (default: one second's worth, at least 1)
    latency_sigma: float = 0.0  # latency ~ latency_ms x lognormal(0, sigma): a provider's long tail
    reasoning_tokens: int = 0  # reply as a reasoning model spending this many tokens reasoning first
    hostile: str | None = None  # "huge" or "gzip-bomb": every completion answers with that body
    max_in_flight: int | None = None  # the account's calls in flight: past it, 429 (as vLLM-style providers)


class TokenBucket:
    """The server side of a requests-per-minute limit: ``rate`` per second, ``capacity`` at once."""

    def __init__(self, per_minute: float, capacity: float | None):
        self.rate = per_minute / 60.0
        self.capacity = capacity if capacity is not None else max(1.0, self.rate)
        self.tokens, self.stamp = self.capacity, time.monotonic()

    def take(self) -> float:
        """0 if a request may pass now (and take its token), else the seconds until one may."""
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class SimServer:
    def __init__(self, config: ServerConfig):
        self.config = config
        self.models = {name: SimulatedModel(name) for name in PROFILES}
        self._rng = random.Random(config.seed)
        self._latency_rng = random.Random(config.seed + 1)
        self.bucket = TokenBucket(config.rpm, config.rpm_burst) if config.rpm else None
        self.stats: dict = {"requests": 0, **{f: 0 for f in FAULTS}, "over_rpm": 0, "completions": 0,
                            "last_options": {}, "in_flight": 0, "max_in_flight": 0, "over_in_flight": 0,
                            "in_flight_s": 0.0}
        self._since = time.monotonic()  # in_flight_s: the integral of in_flight over time (mean = it / wall)
        self._bomb: bytes | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_get("/v1/models", self.list_models)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/health", self.health)
        return app

    async def health(self, _request: web.Request) -> web.Response:
        return web.json_response({"ok": True, **self.stats})

    def _authorized(self, request: web.Request) -> bool:
        if not self.config.api_key:
            return True
        return request.headers.get("Authorization", "") == f"Bearer {self.config.api_key}"

    async def list_models(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return _error(401, "invalid_api_key", "Incorrect API key provided.")
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "envduels-sim"} for name in self.models]
        return web.json_response({"object": "list", "data": data})

    def _count(self, change: int) -> None:
        now = time.monotonic()
        self.stats["in_flight_s"] += self.stats["in_flight"] * (now - self._since)
        self._since = now
        self.stats["in_flight"] += change
        self.stats["max_in_flight"] = max(self.stats["max_in_flight"], self.stats["in_flight"])

    async def chat(self, request: web.Request) -> web.StreamResponse:
        """Counts the chat requests in flight (GET /health: now, the most at once, their time integral)."""
        self._count(+1)
        try:
            limit = self.config.max_in_flight
            if limit and self.stats["in_flight"] > limit:
                self.stats["over_in_flight"] += 1
                return web.json_response({"error": {"message": f"Too many requests in flight (limit {limit})",
                                                    "type": "rate_limit_error"}}, status=429,
                                         headers={"Retry-After": "0.05"})
            return await self._chat(request)
        finally:
            self._count(-1)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.stats["requests"] += 1
        if not self._authorized(request):
            return _error(401, "invalid_api_key", "Incorrect API key provided.")
        try:
            body = await request.json()
            name = str(body["model"]).split("/")[-1]
            messages = [{"role": m["role"], "content": m["content"]} for m in body["messages"]]
        except (json.JSONDecodeError, KeyError, TypeError):
            return _error(400, "invalid_request_error", "body must be JSON with 'model' and 'messages'")
        typed = None
        if body.get(WIRE_FIELD) is not None:  # sent only by clients whose registry declares this server
            try:
                typed = from_wire(body[WIRE_FIELD])
            except ValueError as exc:
                return _error(400, "invalid_request_error", f"'{WIRE_FIELD}' is not a valid request: {exc}"[:500])
        model = self.models.get(name)
        if model is None:
            return _error(404, "model_not_found", f"The model '{name}' does not exist.")
        self.stats["last_options"] = {k: v for k, v in body.items() if k not in STANDARD_FIELDS}
        if self.bucket is not None and (wait := self.bucket.take()) > 0:  # the account's limit, as providers hold it
            self.stats["over_rpm"] += 1
            return web.json_response({"error": {"message": f"Rate limit reached: {self.config.rpm:g} requests per "
                                                           "minute", "type": "rate_limit_error"}},
                                     status=429, headers={"Retry-After": f"{wait:.3f}"})
        if self.config.latency_ms:
            scale = self._latency_rng.lognormvariate(0.0, self.config.latency_sigma) if self.config.latency_sigma else 1
            await asyncio.sleep(self.config.latency_ms * scale / 1000)
        if self.config.hostile:
            return await self._hostile(request)
        fault = self._draw_fault()
        if fault == "rate_limit":
            return web.json_response({"error": {"message": "Rate limit reached", "type": "rate_limit_error"}},
                                     status=429, headers={"Retry-After": "0.05"})
        if fault == "server_error":
            return _error(500, "server_error", "The server had an error while processing your request.")
        if fault == "timeout":
            await asyncio.sleep(self.config.timeout_fault_s)
            return _error(504, "timeout", "upstream timed out")
        text = model.respond(messages, body.get("seed"), typed)
        prompt_tokens, completion_tokens = estimate_usage(messages, text)
        message: dict = {"role": "assistant", "content": text}
        finish, details = "stop", None
        if self.config.reasoning_tokens:
            text, completion_tokens, finish = reasoned(text, completion_tokens, self.config.reasoning_tokens,
                                                       body.get("max_tokens"))
            message = {"role": "assistant", "content": text,
                       "reasoning_content": "Let me think. " * max(1, self.config.reasoning_tokens // 4)}
            details = {"reasoning_tokens": min(self.config.reasoning_tokens, completion_tokens)}
        usage: dict = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                       "total_tokens": prompt_tokens + completion_tokens}
        if details is not None:
            usage["completion_tokens_details"] = details
        self.stats["completions"] += 1
        if fault == "malformed":
            return web.Response(status=200, text='{"id": "chatcmpl-broken", "choices": [', content_type="application/json")
        ident, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())
        if body.get("stream"):
            return await self._stream(request, ident, created, name, text, usage, body)
        return web.json_response({
            "id": ident, "object": "chat.completion", "created": created, "model": name,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        })

    async def _hostile(self, request: web.Request) -> web.StreamResponse:
        """A 200 no client should read whole: 512 MB streamed without a length, or a ~1 MB gzip bomb."""
        head = b'{"id":"chatcmpl-hostile","object":"chat.completion","choices":[{"index":0,"message":' \
               b'{"role":"assistant","content":"'
        if self.config.hostile == "gzip-bomb":
            if self._bomb is None:
                self._bomb = gzip_bomb(head, BOMB_BYTES)
            return web.Response(status=200, body=self._bomb,
                                headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        block = b"a" * (1 << 20)
        try:
            await resp.write(head)
            for _ in range(HUGE_BYTES // len(block)):
                await resp.write(block)
            await resp.write(b'"}}]}')
            await resp.write_eof()
        except (ConnectionError, RuntimeError):  # the client refused the rest: what a bounded client does
            pass
        return resp

    async def _stream(self, request, ident, created, name, text, usage, body) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)

        def chunk(delta: dict, finish: str | None = None, with_usage: bool = False) -> bytes:
            payload = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": name,
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            if with_usage:
                payload = {**payload, "choices": [], "usage": usage}
            return f"data: {json.dumps(payload)}\n\n".encode()

        await resp.write(chunk({"role": "assistant", "content": ""}))
        for i in range(0, len(text), 16):
            await resp.write(chunk({"content": text[i:i + 16]}))
        await resp.write(chunk({}, "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            await resp.write(chunk({}, with_usage=True))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    def _draw_fault(self) -> str | None:
        if self.config.fault_rate <= 0 or self._rng.random() >= self.config.fault_rate:
            return None
        fault = self._rng.choice(FAULTS)
        self.stats[fault] += 1
        return fault


def reasoned(text: str, completion_tokens: int, reasoning: int, max_tokens) -> tuple[str, int, str]:
    """A reasoning model's reply: ``reasoning`` tokens spent first, then the answer, cut at ``max_tokens``
    (the visible text shortened, ``finish_reason`` "length"), as reasoning providers answer."""
    total = reasoning + completion_tokens
    if not isinstance(max_tokens, int) or total <= max_tokens:
        return text, total, "stop"
    visible = max(0, max_tokens - reasoning)
    return text[: visible * 4], max_tokens, "length"


def gzip_bomb(head: bytes, size: int) -> bytes:
    """``head`` + filler, ~``size`` bytes in all, as one gzip member (1 GiB -> ~1 MB).

    Built without compressing 1 GiB: after a full flush a deflate stream refers to nothing before it, so
    one compressed 1 MB block repeats verbatim; only the CRC runs over the whole content."""
    import struct
    import zlib

    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = b"a" * (1 << 20)
    first = packer.compress(head) + packer.flush(zlib.Z_FULL_FLUSH)
    segment = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    n = (size - len(head)) // len(block)
    tail = b'"}}]}'
    last = packer.compress(tail) + packer.flush()
    crc = zlib.crc32(head)
    for _ in range(n):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(tail, crc)
    total = len(head) + n * len(block) + len(tail)
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + first + segment * n + last
            + struct.pack("<II", crc, total & 0xFFFFFFFF))


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": code, "code": code}}, status=status)


def serve(host: str, port: int, config: ServerConfig) -> None:
    """Run until interrupted; prints the base URL once listening."""
    server = SimServer(config)

    async def main() -> None:
        runner = web.AppRunner(server.app(), access_log=None)
        await runner.setup()
        # a stop waits at most 1 s for requests in flight (a timeout fault may sleep far longer)
        site = web.TCPSite(runner, host, port, shutdown_timeout=1.0)
        await site.start()
        listening = site._server  # aiohttp keeps the asyncio server private; its socket tells the bound port
        sockets = getattr(listening, "sockets", None)
        bound = sockets[0].getsockname()[1] if sockets else port
        # Stop on SIGTERM and SIGINT whatever this process inherited: a parent that ignores or blocks SIGTERM
        # (SIG_IGN and the signal mask survive exec) would otherwise leave the server running after `kill`.
        stop = asyncio.Event()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        extras = "".join([f", {config.rpm:g} requests per minute" if config.rpm else "",
                          f", reasoning {config.reasoning_tokens} tokens" if config.reasoning_tokens else "",
                          f", {config.max_in_flight} in flight" if config.max_in_flight else "",
                          f", hostile {config.hostile}" if config.hostile else ""])
        print(f"envduels serve-sim listening on http://{host}:{bound}/v1 "
              f"(latency {config.latency_ms:g} ms, fault rate {config.fault_rate:g}{extras})", flush=True)
        await stop.wait()
        await runner.cleanup()

    asyncio.run(main())
