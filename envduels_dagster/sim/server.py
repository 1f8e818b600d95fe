"""``envduels serve-sim``: the simulated models behind an OpenAI-compatible HTTP API.

Why: real providers are unreachable from these machines, yet the litellm path
(and any OpenAI client) must be exercised for real. This server answers
``/v1/models`` and ``/v1/chat/completions`` (plain and streaming, with usage)
with exactly the replies the in-process simulated models give, and can inject
the failures real providers produce: 429 with Retry-After, 500, timeouts and
malformed bodies. It never logs request bodies or Authorization headers. The engine's typed
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


@dataclass
class ServerConfig:
    latency_ms: float = 0.0
    fault_rate: float = 0.0
    seed: int = 0
    timeout_fault_s: float = 30.0  # how long a "timeout" fault hangs before answering 504
    api_key: str | None = None  # when set, requests must carry it as a Bearer token


class SimServer:
    def __init__(self, config: ServerConfig):
        self.config = config
        self.models = {name: SimulatedModel(name) for name in PROFILES}
        self._rng = random.Random(config.seed)
        self.stats = {"requests": 0, **{f: 0 for f in FAULTS}}

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

    async def chat(self, request: web.Request) -> web.StreamResponse:
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
        if self.config.latency_ms:
            await asyncio.sleep(self.config.latency_ms / 1000)
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
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}
        if fault == "malformed":
            return web.Response(status=200, text='{"id": "chatcmpl-broken", "choices": [', content_type="application/json")
        ident, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())
        if body.get("stream"):
            return await self._stream(request, ident, created, name, text, usage, body)
        return web.json_response({
            "id": ident, "object": "chat.completion", "created": created, "model": name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": usage,
        })

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
        print(f"envduels serve-sim listening on http://{host}:{bound}/v1 "
              f"(latency {config.latency_ms:g} ms, fault rate {config.fault_rate:g})", flush=True)
        await stop.wait()
        await runner.cleanup()

    asyncio.run(main())
