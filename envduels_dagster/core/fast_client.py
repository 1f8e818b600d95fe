"""A lean async client for OpenAI-compatible chat endpoints (vLLM, serve-sim, OpenAI-compatible proxies).

Why: on 2 cores every Python client is CPU-bound against a fast server; litellm
spends ~7.5 ms of client CPU per call, a bare aiohttp call ~0.5 ms. This client
keeps one pooled connection set per event loop, encodes and decodes with orjson,
and raises exceptions that ``gateway.classify_exception`` maps onto the same
error taxonomy as the litellm path, so retries, timeouts, usage and results are
identical. It never logs requests, and the key only travels in the header.
"""

from __future__ import annotations

import asyncio

import aiohttp
import orjson


class HTTPStatusError(Exception):
    def __init__(self, status_code: int, message: str, retry_after: float | None):
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code
        self.retry_after = retry_after


class MalformedBody(Exception):
    pass


class FastClient:
    """One aiohttp session (connection pool) for the event loop it was first used in."""

    def __init__(self, limit: int = 256):
        self._limit = limit
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._limit, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector, json_serialize=lambda o: orjson.dumps(o).decode())
        return self._session

    async def chat(self, api_base: str, model: str, messages, *, api_key: str | None, temperature: float,
                   max_tokens: int, seed: int | None, timeout_s: float) -> tuple[str, int, int]:
        """(text, prompt_tokens, completion_tokens); raises HTTPStatusError, MalformedBody, timeouts, OSError."""
        body = {"model": model, "messages": messages, "temperature": temperature, "max_tokens": max_tokens}
        if seed is not None:
            body["seed"] = seed
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {api_key or 'no-key'}"}
        url = api_base.rstrip("/") + "/chat/completions"
        session = self._get_session()
        async with asyncio.timeout(timeout_s):
            async with session.post(url, data=orjson.dumps(body), headers=headers) as resp:
                raw = await resp.read()
                if resp.status != 200:
                    retry_after = resp.headers.get("Retry-After")
                    try:
                        wait = float(retry_after) if retry_after is not None else None
                    except ValueError:
                        wait = None
                    raise HTTPStatusError(resp.status, raw[:300].decode(errors="replace"), wait)
        try:
            data = orjson.loads(raw)
            text = data["choices"][0]["message"]["content"]
            usage = data["usage"]
            return text, int(usage["prompt_tokens"]), int(usage["completion_tokens"])
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, ValueError) as exc:
            raise MalformedBody(f"unreadable completion body: {type(exc).__name__}") from None

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
