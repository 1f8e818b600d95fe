"""litellm formats, the lean transport sends (core/models/litellm_lean.py): for providers.LEAN_LITELLM_PROVIDERS the
request on the wire, the completion read from a reply, the error classes and the cost are litellm's own
``acompletion``'s. Each case runs both paths through one Gateway -- ``client: litellm`` (the new default) and
``client: litellm-full`` (litellm.acompletion) -- against one real local server (tests/helpers/provider_server.py,
the OpenAI chat API and the Anthropic Messages API) and compares what each sent and got."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import pytest

from envduels_dagster.core.models import Gateway, LLMError, RetryPolicy
from envduels_dagster.core.models.providers import LITELLM_BACKEND, LITELLM_LEAN_BACKEND, backend_name
from envduels_dagster.core.models.registry import load_registry
from tests.helpers.provider_server import ProviderServer

KEY = "sk-lean-canary-7f3a9c1e5b"
MESSAGES = [{"role": "system", "content": "You play a game."}, {"role": "user", "content": "Observation: start"},
            {"role": "assistant", "content": "Action: left"}, {"role": "user", "content": "Observation: wall"}]
# the headers that decide what a provider does with a request (the SDKs' own User-Agent/telemetry ones do not)
HEADERS = ("authorization", "x-api-key", "anthropic-version", "anthropic-beta", "content-type")


def registry(tmp_path, model: str, api_base: str | None, extra: str = ""):
    """One model twice: ``lean`` (client: litellm, the default path) and ``full`` (client: litellm-full)."""
    base = f"    api_base: {api_base}\n" if api_base else ""
    entries = "".join(f"  - name: {name}\n    model: {model}\n{base}    api_key_env: LEAN_TEST_KEY\n"
                      f"    client: {client}\n    max_tokens: 2048\n{extra}"
                      for name, client in (("lean", "litellm"), ("full", "litellm-full")))
    path = tmp_path / "models.yaml"
    path.write_text("models:\n" + entries)
    return load_registry(path)


def sent(server: ProviderServer):
    (request,) = server.requests  # exactly one request per call
    server.requests.clear()
    return request.method, request.path, {k.lower(): v for k, v in request.headers.items()
                                          if k.lower() in HEADERS}, request.body


def both(tmp_path, server: ProviderServer, model: str, api_base: str | None, extra: str = "",
         seed: int | None = None, policy: RetryPolicy | None = None):
    """(what lean sent, its response or error), (the same for full), and the backends that served them. A gateway
    each: a 429's hold of the pool (the gateway's) does not delay the other path's call."""
    entries = registry(tmp_path, model, api_base, extra)

    async def main():
        out, backends = [], []
        for name in ("lean", "full"):
            gateway = Gateway(entries, policy=policy or RetryPolicy(max_attempts=1))
            try:
                try:
                    result = await gateway.chat(name, MESSAGES, seed=seed)
                except LLMError as exc:
                    result = exc
                out.append((sent(server) if server.requests else None, result))
                backends.append(type(gateway.backend(entries.get(name))).__name__)
            finally:
                await gateway.aclose()
        return out, backends

    return asyncio.run(main())


def reply_fields(response) -> dict:
    return response.model_dump(include={"text", "prompt_tokens", "completion_tokens", "reasoning_tokens",
                                        "finish_reason", "cost_usd"})


CASES = [
    ("openai/gpt-4o-mini", "", 7, True),
    ("openai/gpt-4o-mini", "    temperature: 0.3\n    params: {top_p: 0.5, stop: ['\\n'], presence_penalty: 0.1, "
                           "extra_body: {service_tier: flex}}\n", 7, True),
    ("openai/o3-mini", "    temperature: 1.0\n    params: {reasoning_effort: low}\n", 7, True),  # system -> user
    ("openai/my-finetune", "", None, False),  # not in litellm's price map: priced by the registry (0)
    ("anthropic/claude-haiku-4-5", "", None, True),
    ("anthropic/claude-haiku-4-5", "", 7, True),  # Anthropic takes no seed: not sent (it used to fail every call)
    ("anthropic/claude-haiku-4-5", "    temperature: 0.2\n    params: {top_p: 0.9, stop: [END], "
                                   "extra_body: {metadata: {user_id: u1}}}\n", None, True),
    ("anthropic/claude-sonnet-4-5", "    temperature: 1.0\n    params: {thinking: {type: enabled, "
                                    "budget_tokens: 1024}}\n", None, True),
]


@pytest.mark.parametrize("model, extra, seed, priced", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_the_same_wire_request_and_completion_as_litellms_own_acompletion(model, extra, seed, priced, tmp_path,
                                                                         monkeypatch):
    monkeypatch.setenv("LEAN_TEST_KEY", KEY)

    async def run():
        async with ProviderServer(reasoning_tokens=3, cached_tokens=8, finish="length") as server:
            api_base = server.base + ("/v1" if model.startswith("openai/") else "")
            return await asyncio.to_thread(both, tmp_path, server, model, api_base, extra, seed)

    ((lean_sent, lean), (full_sent, full)), backends = asyncio.run(run())
    assert backends == ["LitellmLeanBackend", "LitellmBackend"]
    assert not isinstance(full, Exception), full
    assert lean_sent == full_sent  # method, path, body, and the headers that matter
    method, path, headers, body = lean_sent
    assert method == "POST" and path == ("/v1/chat/completions" if model.startswith("openai/") else "/v1/messages")
    assert (headers.get("authorization") == f"Bearer {KEY}") or headers.get("x-api-key") == KEY
    assert reply_fields(lean) == reply_fields(full)
    assert lean.text == "hello there" and lean.prompt_tokens == 21
    assert (lean.cost_usd > 0) is priced  # equal costs are litellm's price map's, not two zeros
    assert ("seed" in body) is (seed is not None and model.startswith("openai/"))


def test_the_typed_request_of_a_serve_sim_endpoint_goes_in_the_body_as_litellm_sends_it(tmp_path):
    from envduels_dagster.core.models.contract import WIRE_FIELD
    from envduels_dagster.core.models.litellm_call import litellm_call
    from envduels_dagster.core.models.litellm_lean import format_request, resolve_route
    from envduels_dagster.core.models.types import CallConfig

    async def run():
        async with ProviderServer() as server:
            entry = registry(tmp_path, "openai/novice", server.base + "/v1", "    params: {extra_body: {a: 1}}\n"
                             ).get("lean")
            config = CallConfig(seed=1, params=entry.params, request={"kind": "act", "turn": 2}, api_key=KEY)
            await litellm_call(entry, MESSAGES, config)
            return sent(server), format_request(resolve_route(entry), entry, MESSAGES, config)

    full, wire = asyncio.run(run())
    assert full[3][WIRE_FIELD] == {"kind": "act", "turn": 2} and full[3]["a"] == 1
    assert wire.body == full[3] and wire.url.endswith("/v1/chat/completions")
    assert KEY not in repr(wire)  # a logged request shows no key


def test_without_an_api_base_the_request_goes_where_litellm_sends_it(tmp_path, monkeypatch):
    """No api_base: litellm's default endpoints; its own variables (OPENAI_BASE_URL, ANTHROPIC_BASE_URL) move both
    paths alike, which lets a local server stand in for the provider."""
    from envduels_dagster.core.models.litellm_lean import resolve_route

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_BASE", raising=False)
    entries = registry(tmp_path, "openai/gpt-4o-mini", None)
    route = resolve_route(entries.get("lean"))
    assert route.api_base == "https://api.openai.com/v1"
    assert route.config.get_complete_url(route.api_base, KEY, route.model, {}, {}) == \
        "https://api.openai.com/v1/chat/completions"
    assert resolve_route(registry(tmp_path, "anthropic/claude-haiku-4-5", None).get("lean")).api_base == \
        "https://api.anthropic.com/v1/messages"
    monkeypatch.setenv("LEAN_TEST_KEY", KEY)

    async def run(model: str, variable: str, suffix: str):
        async with ProviderServer() as server:
            monkeypatch.setenv(variable, server.base + suffix)
            return await asyncio.to_thread(both, tmp_path, server, model, None)

    for model, variable, suffix in (("openai/gpt-4o-mini", "OPENAI_BASE_URL", "/v1"),
                                    ("anthropic/claude-haiku-4-5", "ANTHROPIC_BASE_URL", "")):
        ((lean_sent, lean), (full_sent, full)), _ = asyncio.run(run(model, variable, suffix))
        assert lean_sent == full_sent and reply_fields(lean) == reply_fields(full)


ERRORS = [  # (model, status, reply headers, error class)
    ("openai/gpt-4o-mini", 429, {"Retry-After": "7"}, "rate_limit"),
    ("openai/gpt-4o-mini", 500, {}, "server_error"),
    ("openai/gpt-4o-mini", 401, {}, "auth_error"),
    ("openai/gpt-4o-mini", 400, {}, "bad_request"),
    ("anthropic/claude-haiku-4-5", 429, {"Retry-After": "3"}, "rate_limit"),
    ("anthropic/claude-haiku-4-5", 529, {}, "server_error"),  # Anthropic's "overloaded"
    ("anthropic/claude-haiku-4-5", 500, {}, "server_error"),
    ("anthropic/claude-haiku-4-5", 401, {}, "auth_error"),
    ("anthropic/claude-haiku-4-5", 400, {}, "bad_request"),
]


@pytest.mark.parametrize("model, status, headers, error_class", ERRORS,
                         ids=[f"{e[0].split('/')[0]}-{e[1]}" for e in ERRORS])
def test_error_statuses_map_to_the_same_classes_and_the_key_is_never_shown(model, status, headers, error_class,
                                                                            tmp_path, monkeypatch, caplog):
    """The provider echoes the key in its error (some do): neither the error nor any log line shows it."""
    monkeypatch.setenv("LEAN_TEST_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    echo = json.dumps({"type": "error", "error": {"type": "x", "message": f"key {KEY} refused"}})

    async def run():
        async with ProviderServer() as server:
            for _ in range(2):
                server.fail_next(status, headers, echo)
            api_base = server.base + ("/v1" if model.startswith("openai/") else "")
            return await asyncio.to_thread(both, tmp_path, server, model, api_base)

    ((lean_sent, lean), (full_sent, full)), _ = asyncio.run(run())
    assert isinstance(lean, LLMError) and isinstance(full, LLMError)
    assert lean.error_class == full.error_class == error_class
    assert lean_sent == full_sent
    assert KEY not in lean.message and KEY not in str(lean) and KEY not in caplog.text
    assert "***" in lean.message  # the echoed key was there, and was blanked


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "anthropic/claude-haiku-4-5"])
def test_a_rate_limit_is_retried_after_the_providers_retry_after(model, tmp_path, monkeypatch):
    monkeypatch.setenv("LEAN_TEST_KEY", KEY)

    async def run():
        async with ProviderServer() as server:
            api_base = server.base + ("/v1" if model.startswith("openai/") else "")
            gateway = Gateway(registry(tmp_path, model, api_base), policy=RetryPolicy(base_delay_s=0.01))
            server.fail_next(429, {"Retry-After": "1"})
            t0 = time.monotonic()
            try:
                reply = await gateway.chat("lean", MESSAGES)
            finally:
                await gateway.aclose()
            return reply, time.monotonic() - t0, len(server.requests)

    reply, took, calls = asyncio.run(run())
    assert reply.attempts == 2 and reply.retried_errors == ["rate_limit"] and calls == 2
    assert took >= 0.95  # waited for the provider's Retry-After, not the 10 ms backoff


def test_an_oversized_reply_is_refused_unread_and_a_hanging_one_times_out(tmp_path, monkeypatch):
    monkeypatch.setenv("LEAN_TEST_KEY", KEY)

    async def run():
        async with ProviderServer(reply_bytes=300_000) as server:
            entries = registry(tmp_path, "anthropic/claude-haiku-4-5", server.base,
                               "    max_reply_bytes: 100000\n    timeout_s: 0.5\n")
            gateway = Gateway(entries, policy=RetryPolicy(max_attempts=2, base_delay_s=0.01))
            try:
                with pytest.raises(LLMError) as big:
                    await gateway.chat("lean", MESSAGES)
                server.reply_bytes, server.delay_s = 0, 30.0
                t0 = time.monotonic()
                with pytest.raises(LLMError) as slow:
                    await gateway.chat("lean", MESSAGES)
                return big.value, slow.value, time.monotonic() - t0
            finally:
                await gateway.aclose()

    big, slow, took = asyncio.run(run())
    assert big.error_class == "malformed_response" and "over max_reply_bytes = 100000" in big.message
    assert big.retried_errors == ["malformed_response"]
    assert slow.error_class == "timeout" and slow.retried_errors == ["timeout"]
    assert took < 3  # two attempts of timeout_s = 0.5 (the call's deadline), not the server's 30 s


def test_the_path_is_chosen_per_entry_and_litellm_full_keeps_acompletion(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text("""models:
  - {name: a, model: openai/gpt-4o-mini}
  - {name: b, model: anthropic/claude-haiku-4-5, client: litellm}
  - {name: c, model: anthropic/claude-haiku-4-5, client: litellm-full}
  - {name: d, model: openai/gpt-4o-mini, params: {logprobs: true}}
  - {name: e, model: groq/llama-3.1-8b-instant}
  - {name: f, model: openai/novice, api_base: 'http://127.0.0.1:9/v1'}
  - {name: g, model: openai/novice, api_base: 'http://127.0.0.1:9/v1', client: litellm}
""")
    entries = load_registry(path)
    chosen = {name: backend_name(entries.get(name).model, entries.get(name)) for name in "abcdefg"}
    assert chosen == {"a": LITELLM_LEAN_BACKEND, "b": LITELLM_LEAN_BACKEND, "c": LITELLM_BACKEND,
                      "d": LITELLM_BACKEND,  # an option no wire test covers: litellm maps it
                      "e": LITELLM_BACKEND, "f": "openai-http", "g": LITELLM_LEAN_BACKEND}


def test_a_model_litellm_bridges_to_the_responses_api_keeps_acompletion(tmp_path):
    from envduels_dagster.core.models.litellm_lean import resolve_route

    entries = registry(tmp_path, "openai/gpt-5-codex", None)
    assert resolve_route(entries.get("lean")) is None  # LitellmLeanBackend hands such calls to litellm_call


def test_litellm_worker_processes_serve_only_the_full_path(tmp_path, monkeypatch):
    """Gateway(litellm_processes=1): a client: litellm entry of openai/anthropic starts no worker process (its
    litellm work is formatting, in the event loop's process); the workers stay for litellm.acompletion's calls."""
    monkeypatch.setenv("LEAN_TEST_KEY", KEY)

    async def run():
        async with ProviderServer() as server:
            entries = registry(tmp_path, "anthropic/claude-haiku-4-5", server.base)
            gateway = Gateway(entries, policy=RetryPolicy(max_attempts=1), litellm_processes=1)
            try:
                reply = await gateway.chat("lean", MESSAGES)
                return reply, sorted(gateway._backends), len(server.requests)
            finally:
                await gateway.aclose()

    reply, backends, calls = asyncio.run(run())
    assert reply.text == "hello there" and calls == 1
    assert backends == [LITELLM_LEAN_BACKEND]  # the litellm backend (and its workers) never started


def _refused_call(tmp_path, entry, policy: RetryPolicy | None = None) -> tuple[LLMError, int]:
    """One call to a one-model registry (``entry(server)``: its YAML mapping) that must fail: the error, and how
    many requests reached the server."""

    async def run():
        async with ProviderServer() as server:
            path = tmp_path / "models.yaml"
            path.write_text(f"models:\n  - {entry(server)}\n")
            gateway = Gateway(load_registry(path), policy=policy)
            try:
                with pytest.raises(LLMError) as raised:
                    await gateway.chat("m", MESSAGES)
                return raised.value, len(server.requests)
            finally:
                await gateway.aclose()

    return asyncio.run(run())


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "anthropic/claude-haiku-4-5"])
def test_no_key_anywhere_is_a_fatal_auth_error_and_nothing_is_sent(model, tmp_path, monkeypatch):
    """No api_key_env and no provider variable: an auth_error (fatal), never retried, no request made. (litellm's
    acompletion reports OpenAI's missing key as an InternalServerError, which the gateway retried as a
    server_error; Anthropic's as an AuthenticationError.)"""
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(variable, raising=False)

    def entry(server):
        monkeypatch.setenv("OPENAI_BASE_URL", server.base + "/v1")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base)
        return f"{{name: m, model: {model}}}"

    error, calls = _refused_call(tmp_path, entry, RetryPolicy(base_delay_s=0.01))
    assert error.error_class == "auth_error" and error.fatal and error.attempts == 1 and calls == 0
    assert "key" in error.message.lower() and ("OPENAI_API_KEY" in error.message or "ANTHROPIC" in error.message)


SHAPES = [  # message lists the providers' transformations rewrite: merged system turns, runs of one role, ...
    [{"role": "system", "content": "a"}, {"role": "system", "content": "b"}, {"role": "user", "content": "u"},
     {"role": "user", "content": "v"}],
    [{"role": "user", "content": "u"}, {"role": "assistant", "content": ""}, {"role": "user", "content": "v"}],
    [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}],
    [{"role": "developer", "content": "d"}, {"role": "user", "content": "u"}],
]


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "openai/o3-mini", "anthropic/claude-haiku-4-5"])
def test_message_shapes_are_formatted_as_litellm_formats_them(model, tmp_path, monkeypatch):
    from envduels_dagster.core.models.litellm_call import call_config, litellm_call
    from envduels_dagster.core.models.litellm_lean import LitellmLeanBackend
    from envduels_dagster.core.models.types import BackendCall, BackendOptions

    async def run():
        async with ProviderServer() as server:
            api_base = server.base + ("/v1" if model.startswith("openai/") else "")
            extra = "    temperature: 1.0\n" if "o3" in model else ""
            entry = registry(tmp_path, model, api_base, extra).get("lean")
            backend = LitellmLeanBackend(BackendOptions())
            pairs = []
            try:
                for messages in SHAPES:
                    call = BackendCall(messages, 3, entry.temperature, entry.max_tokens, None, KEY, 10.0)
                    full = await litellm_call(entry, messages, call_config(entry, call))
                    full_sent = sent(server)
                    lean = await backend.complete(entry, call)
                    pairs.append(((full_sent, full), (sent(server), lean)))
            finally:
                await backend.aclose()
            return pairs

    for (full_sent, full), (lean_sent, lean) in asyncio.run(run()):
        assert lean_sent == full_sent and lean == full


def test_finish_reasons_read_as_litellm_reads_them(tmp_path, monkeypatch):
    """litellm maps a server's finish reason (vLLM's "eos", none at all) onto OpenAI's; so does the new path."""
    monkeypatch.setenv("LEAN_TEST_KEY", KEY)

    async def run():
        out = []
        async with ProviderServer() as server:
            for finish in ("stop", "length", "content_filter", "eos", None):
                server.finish = finish
                out.append(await asyncio.to_thread(both, tmp_path, server, "openai/gpt-4o-mini",
                                                   server.base + "/v1"))
        return out

    read = [(lean.finish_reason, full.finish_reason) for ((_, lean), (_, full)), _ in asyncio.run(run())]
    assert read == [(f, f) for f in ("stop", "length", "content_filter", "stop", "stop")]


@pytest.mark.parametrize("model, client", [("anthropic/claude-haiku-4-5", "litellm"), ("openai/novice", "fast")])
def test_a_key_with_a_line_break_is_refused_unsent_and_unshown(model, client, tmp_path, monkeypatch):
    """A key's variable with a trailing newline would end the request's header early: refused, fatal, not sent."""
    monkeypatch.setenv("LEAN_TEST_KEY", KEY + "\r\nX-Injected: 1")

    error, calls = _refused_call(tmp_path, lambda server: f"{{name: m, model: {model}, api_base: '{server.base}/v1', "
                                                          f"api_key_env: LEAN_TEST_KEY, client: {client}}}")
    assert error.error_class == "bad_request" and error.fatal and error.attempts == 1 and calls == 0
    assert "holds a line break: not sent" in error.message and KEY not in str(error)
