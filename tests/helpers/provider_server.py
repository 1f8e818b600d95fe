"""A real local HTTP server speaking the Anthropic Messages API and OpenAI's chat completions, recording requests.

``ProviderServer`` runs an aiohttp server on 127.0.0.1 (the OS picks the port) in the test's event loop.
``POST .../v1/messages`` answers as Anthropic does (a ``message`` object: content blocks, ``stop_reason``,
``usage.input_tokens``/``output_tokens``; errors as ``{"type": "error", "error": {...}}``), ``POST
.../chat/completions`` as OpenAI does. Every request is recorded (method, path, headers, JSON body), so a test can
compare what two clients sent. ``fail_next(status, headers, body)`` makes the next request answer with that error;
``reply_bytes`` pads the reply to a size; ``delay_s`` holds every reply back.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

from aiohttp import web

ANTHROPIC_ERRORS = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error",
                    500: "api_error", 529: "overloaded_error"}


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: dict


@dataclass
class ProviderServer:
    text: str = "hello there"
    prompt_tokens: int = 21
    completion_tokens: int = 7
    reasoning_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens read from the provider's prompt cache (priced lower)
    finish: str | None = "stop"  # OpenAI's finish_reason; Anthropic's stop_reason is derived (stop -> end_turn)
    delay_s: float = 0.0
    reply_bytes: int = 0
    requests: list[Recorded] = field(default_factory=list)
    _failures: list[tuple[int, dict[str, str], str | None]] = field(default_factory=list)
    _runner: web.AppRunner | None = None
    _closing: asyncio.Event = field(default_factory=asyncio.Event)
    port: int = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fail_next(self, status: int, headers: dict[str, str] | None = None, body: str | None = None) -> None:
        self._failures.append((status, headers or {}, body))

    async def __aenter__(self) -> ProviderServer:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc) -> None:
        self._closing.set()  # replies still held back end now (the server's cleanup waits for its handlers)
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        body = json.loads(raw) if raw else {}
        self.requests.append(Recorded(request.method, request.path, dict(request.headers), body))
        if self.delay_s:
            try:
                await asyncio.wait_for(self._closing.wait(), self.delay_s)
            except TimeoutError:
                pass
        anthropic = request.path.endswith("/messages")
        if self._failures:
            status, headers, text = self._failures.pop(0)
            if text is None:
                kind = ANTHROPIC_ERRORS.get(status, "api_error")
                text = json.dumps({"type": "error", "error": {"type": kind, "message": f"status {status}"}}
                                  if anthropic else {"error": {"message": f"status {status}", "type": kind}})
            return web.Response(status=status, text=text, headers=headers, content_type="application/json")
        reply = self._anthropic(body) if anthropic else self._openai(body)
        if self.reply_bytes:
            reply["padding"] = "x" * self.reply_bytes
        return web.json_response(reply)

    def _openai(self, body: dict) -> dict:
        usage: dict = {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                       "total_tokens": self.prompt_tokens + self.completion_tokens}
        if self.reasoning_tokens:
            usage["completion_tokens_details"] = {"reasoning_tokens": self.reasoning_tokens}
        if self.cached_tokens:
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000, "model": body.get("model"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": self.text},
                             "finish_reason": self.finish}], "usage": usage}

    def _anthropic(self, body: dict) -> dict:
        content: list[dict] = []
        if self.reasoning_tokens:
            content.append({"type": "thinking", "thinking": "let me think", "signature": "sig"})
        content.append({"type": "text", "text": self.text})
        stop = {"stop": "end_turn", "length": "max_tokens"}.get(self.finish, self.finish)
        return {"id": "msg_1", "type": "message", "role": "assistant", "model": body.get("model"), "content": content,
                "stop_reason": stop, "stop_sequence": None,
                "usage": {"input_tokens": self.prompt_tokens - self.cached_tokens,
                          "output_tokens": self.completion_tokens, "cache_read_input_tokens": self.cached_tokens}}


async def _serve_forever(delay_s: float) -> None:
    async with ProviderServer(delay_s=delay_s) as server:
        print(server.base, flush=True)  # the first line: where it listens (benchmarks/litellm_cpu.py reads it)
        await asyncio.Event().wait()


if __name__ == "__main__":  # python -m tests.helpers.provider_server [delay_ms]: a server in its own process
    import sys

    asyncio.run(_serve_forever(float(sys.argv[1]) / 1000 if len(sys.argv) > 1 else 0.0))
