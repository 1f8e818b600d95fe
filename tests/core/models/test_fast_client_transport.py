"""The lean client's transport against real local servers: one SSL context per client, proxy
variables honoured as httpx/aiohttp do (trust_env), Retry-After as seconds or an HTTP date."""

from __future__ import annotations

import asyncio
import email.utils
import shutil
import ssl
import subprocess
import time

import orjson
import pytest
from aiohttp import web

from envduels_dagster.core.models import classify_exception
from envduels_dagster.core.models.errors import retry_after_seconds
from envduels_dagster.core.models.fast_client import FastClient, H1Client, HTTPStatusError, proxy_for
from envduels_dagster.core.models.types import CallConfig

PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "all_proxy",
              "no_proxy")


@pytest.fixture(autouse=True)
def no_proxy_env(monkeypatch):
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)


def completion(text: str) -> dict:
    return {"choices": [{"message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1}}


async def start(app: web.Application, ssl_context: ssl.SSLContext | None = None) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]


def make_client(transport: str) -> FastClient:
    """``h1``: the default httptools transport; ``aiohttp``: the plain aiohttp one (no httptools)."""
    if transport == "h1":
        return H1Client()
    client = object.__new__(FastClient)  # FastClient() picks H1Client when httptools is importable
    FastClient.__init__(client)
    return client


async def chat(client: FastClient, base: str, timeout_s: float = 5.0):
    reply = await client.chat(base, "m", [{"role": "user", "content": "hi"}],
                              CallConfig(temperature=0.0, max_tokens=8, seed=1, timeout_s=timeout_s))
    return reply.text, reply.prompt_tokens, reply.completion_tokens


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "key.pem"),
                    "-out", str(d / "cert.pem"), "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
    return d / "cert.pem", d / "key.pem"


@pytest.mark.parametrize("transport", ["h1", "aiohttp"])
def test_one_ssl_context_serves_every_https_connection(transport, certificate, monkeypatch):
    cert, key = certificate
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the client trusts our self-signed server as any OpenSSL client
    built = []
    real = ssl.create_default_context

    def counting(*args, **kwargs):
        ctx = real(*args, **kwargs)
        built.append(ctx)
        return ctx

    async def handler(request: web.Request) -> web.Response:
        # a new connection for every request: what a per-connection context would pay each time
        return web.json_response(completion("ok"), headers={"Connection": "close"})

    async def main():
        server_ctx = real(ssl.Purpose.CLIENT_AUTH)
        server_ctx.load_cert_chain(cert, key)
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        runner, port = await start(app, server_ctx)
        monkeypatch.setattr(ssl, "create_default_context", counting)
        client = make_client(transport)
        try:
            return [await chat(client, f"https://localhost:{port}/v1") for _ in range(5)]
        finally:
            await client.aclose()
            await runner.cleanup()

    replies = asyncio.run(main())
    assert replies == [("ok", 3, 1)] * 5
    assert len(built) == 1  # one context for the client, not one per connection


def test_proxy_variables_route_through_the_proxy_and_no_proxy_bypasses_it(monkeypatch):
    seen: list[tuple[str, str]] = []

    async def proxy(request: web.Request) -> web.Response:
        seen.append((request.method, str(request.url)))
        body = await request.json()
        return web.json_response(completion(f"via proxy for {body['model']}"))

    async def direct(request: web.Request) -> web.Response:
        return web.json_response(completion("direct"))

    async def main():
        proxy_app, direct_app = web.Application(), web.Application()
        proxy_app.router.add_route("*", "/{tail:.*}", proxy)
        direct_app.router.add_post("/v1/chat/completions", direct)
        (prunner, pport), (drunner, dport) = await start(proxy_app), await start(direct_app)
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{pport}")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        client = FastClient()  # the default transport (httptools) hands proxied endpoints to aiohttp
        try:
            # a host only the proxy can reach (.invalid never resolves)
            proxied = await chat(client, "http://models.invalid:8000/v1")
            bypassed = await chat(client, f"http://127.0.0.1:{dport}/v1")
        finally:
            await client.aclose()
            await prunner.cleanup()
            await drunner.cleanup()
        return proxied, bypassed

    proxied, bypassed = asyncio.run(main())
    assert proxied == ("via proxy for m", 3, 1)
    assert seen == [("POST", "http://models.invalid:8000/v1/chat/completions")]
    assert bypassed == ("direct", 3, 1)  # NO_PROXY: straight to the server, the proxy saw nothing more


def test_proxy_for_follows_the_environment(monkeypatch):
    assert proxy_for("https://api.example.com/v1") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.local:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,.internal")
    assert proxy_for("https://api.example.com/v1") == "http://proxy.local:3128"
    assert proxy_for("http://api.example.com/v1") is None  # only HTTPS_PROXY is set
    assert proxy_for("https://vllm.internal:8000/v1") is None
    assert proxy_for("https://localhost:8000/v1") is None


def test_retry_after_given_as_an_http_date_is_read_from_a_real_429():
    async def limited(request: web.Request) -> web.Response:
        when = email.utils.formatdate(time.time() + 3, usegmt=True)
        return web.json_response({"error": {"message": "slow down"}}, status=429, headers={"Retry-After": when})

    async def main():
        app = web.Application()
        app.router.add_post("/v1/chat/completions", limited)
        runner, port = await start(app)
        results = []
        for client in (make_client("h1"), make_client("aiohttp")):
            try:
                await chat(client, f"http://127.0.0.1:{port}/v1")
            except HTTPStatusError as exc:
                results.append(exc)
            finally:
                await client.aclose()
        await runner.cleanup()
        return results

    errors = asyncio.run(main())
    assert len(errors) == 2
    for exc in errors:
        assert exc.status_code == 429 and "slow down" in str(exc)
        assert 1.0 <= exc.retry_after <= 3.5  # an HTTP date has one-second resolution
        error_class, wait = classify_exception(exc)
        assert error_class == "rate_limit" and wait == exc.retry_after


@pytest.mark.parametrize(("value", "expected"), [
    ("7", 7.0), ("0.05", 0.05), ("-3", 0.0), ("soon", None), (None, None),
    ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # a date in the past: retry now
    ("Wed, 21 Oct 2015 07:28:00", None),  # no zone: not an HTTP date
])
def test_retry_after_values(value, expected):
    assert retry_after_seconds(value) == expected


def test_retry_after_date_relative_to_now():
    now = 1_700_000_000.0
    assert retry_after_seconds(email.utils.formatdate(now + 42, usegmt=True), now=now) == pytest.approx(42.0)


def test_request_body_is_plain_openai_json():
    from envduels_dagster.core.models.fast_client import request_body

    body = orjson.loads(request_body("m", [{"role": "user", "content": "x"}], CallConfig(0.0, 8)))
    assert body == {"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 0.0,
                    "max_tokens": 8}
