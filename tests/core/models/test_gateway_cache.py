"""The persistent call cache (a re-run costs nothing) and the error taxonomy of the gateway."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from envduels_dagster.core.authoring.prompts import author_environments
from envduels_dagster.core.models import RETRYABLE, Gateway, MalformedResponse, classify_exception
from envduels_dagster.core.models.call_cache import CallCache, request_key
from envduels_dagster.core.models.registry import load_registry
from envduels_dagster.core.play.episode import PlayConfig, play_pair

SEEDS = [0, 1]
# Fields of an episode that depend on the model's replies (latency, cost and the cached
# flag legitimately differ between a live and a cached run).
PLAYED = ("env_id", "solver", "condition", "seed", "status", "stop_reason", "turns", "format_errors",
          "final_reward", "prompt_tokens", "completion_tokens", "model_calls", "transcript")


async def author_and_play(gateway: Gateway):
    envs = await author_environments(gateway, "journeyman", 2, SEEDS)
    episodes = await play_pair(gateway, "apprentice", envs, PlayConfig(concurrency=2))
    return envs, episodes


def test_second_run_costs_zero_backend_calls_and_replays_identically(sim_registry, tmp_path):
    registry = load_registry(sim_registry(["journeyman", "apprentice"]))
    cache_file = tmp_path / "cache" / "calls.sqlite"

    first = Gateway(registry, CallCache(cache_file))
    envs1, eps1 = asyncio.run(author_and_play(first))
    live_calls = sum(first.stats.backend_calls.values())
    assert [e.valid for e in envs1].count(True) >= 1, "need at least one valid environment to play"
    assert eps1 and live_calls == 2 + sum(e.model_calls for e in eps1)
    assert sum(first.stats.cache_hits.values()) == 0

    # A new gateway and a new cache object on the same file: what a re-run or resumed process sees.
    second = Gateway(registry, CallCache(cache_file))
    envs2, eps2 = asyncio.run(author_and_play(second))
    assert sum(second.stats.backend_calls.values()) == 0
    assert sum(second.stats.cache_hits.values()) == live_calls
    assert [e.model_dump() for e in envs2] == [e.model_dump() for e in envs1]
    assert [e.model_dump(include=set(PLAYED)) for e in eps2] == [e.model_dump(include=set(PLAYED)) for e in eps1]
    assert all(e.cached_calls == e.model_calls and e.cost_usd == 0.0 for e in eps2)
    assert len(CallCache(cache_file)) == live_calls


def test_a_new_model_version_misses_the_cache(sim_registry, tmp_path):
    cache = CallCache(tmp_path / "calls.sqlite")
    messages = [{"role": "user", "content": "Observation: I am thinking of an integer between 1 and 10."}]
    v1 = Gateway(load_registry(sim_registry(["expert"])), cache)
    asyncio.run(v1.chat("expert", messages, seed=0))
    asyncio.run(v1.chat("expert", messages, seed=0))
    assert (v1.stats.backend_calls["expert"], v1.stats.cache_hits["expert"]) == (1, 1)

    # seed and messages are part of the key
    asyncio.run(v1.chat("expert", messages, seed=1))
    asyncio.run(v1.chat("expert", messages + [{"role": "user", "content": "more"}], seed=0))
    assert v1.stats.backend_calls["expert"] == 3

    bumped = tmp_path / "bumped.yaml"
    bumped.write_text("models:\n  - name: expert\n    model: envduels-sim/expert\n    version: '2'\n")
    v2 = Gateway(load_registry(bumped), cache)
    asyncio.run(v2.chat("expert", messages, seed=0))
    assert v2.stats.backend_calls["expert"] == 1 and v2.stats.cache_hits["expert"] == 0


def test_request_key_is_canonical():
    a = {"model": "m", "messages": [{"role": "user", "content": "hé"}], "seed": 1}
    b = json.loads(json.dumps({"seed": 1, "messages": [{"content": "hé", "role": "user"}], "model": "m"}))
    assert request_key(a) == request_key(b)  # key order does not matter
    assert request_key(a) != request_key({**a, "seed": 2})
    assert len(request_key(a)) == 64


def _http_error(cls, status: int, headers: dict | None = None):
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx.Response(status, headers=headers or {}, request=request)
    return cls("boom", response=response, body=None)


def _named(name: str, base: type = Exception, **attrs):
    """An exception whose class has a litellm-style name (litellm maps provider errors to these)."""
    exc = type(name, (base,), {})("boom")
    for key, value in attrs.items():
        setattr(exc, key, value)
    return exc


def test_classify_openai_client_exceptions():
    openai = pytest.importorskip("openai")
    assert classify_exception(_http_error(openai.RateLimitError, 429, {"retry-after": "7"})) == ("rate_limit", 7.0)
    assert classify_exception(_http_error(openai.RateLimitError, 429)) == ("rate_limit", None)
    assert classify_exception(_http_error(openai.InternalServerError, 503))[0] == "server_error"
    assert classify_exception(_http_error(openai.AuthenticationError, 401))[0] == "auth_error"
    assert classify_exception(_http_error(openai.BadRequestError, 400))[0] == "bad_request"
    assert classify_exception(_http_error(openai.NotFoundError, 404))[0] == "bad_request"
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    assert classify_exception(openai.APITimeoutError(request=request))[0] == "timeout"
    assert classify_exception(openai.APIConnectionError(request=request))[0] == "connection_error"


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (_named("RateLimitError"), "rate_limit"),
        (_named("Timeout"), "timeout"),
        (_named("ServiceUnavailableError"), "server_error"),
        (_named("BadGatewayError"), "server_error"),
        (_named("ContextWindowExceededError"), "bad_request"),
        (_named("ContentPolicyViolationError"), "bad_request"),
        (_named("PermissionDeniedError"), "auth_error"),
        (_named("SomeProviderError", status_code=429), "rate_limit"),
        (_named("SomeProviderError", status_code=502), "server_error"),
        (_named("SomeProviderError", status_code=418), "unknown"),
        (_named("APIError"), "server_error"),
        (TimeoutError(), "timeout"),
        (TimeoutError(), "timeout"),
        (ConnectionRefusedError(), "connection_error"),
        (MalformedResponse("no choices"), "malformed_response"),
        (json.JSONDecodeError("x", "doc", 0), "malformed_response"),
        (ValueError("something else"), "unknown"),
    ],
)
def test_classify_exception_mapping(exc, expected):
    assert classify_exception(exc)[0] == expected


def test_retry_policy_follows_the_taxonomy():
    # transient infrastructure failures are retried (DESIGN §4: timeout, 429, 5xx, malformed)...
    assert {"rate_limit", "timeout", "server_error", "connection_error", "malformed_response"} <= RETRYABLE
    # ...a request the provider rejects, or an error we cannot classify, is not
    assert not {"auth_error", "bad_request", "unknown"} & RETRYABLE


def test_retry_after_from_litellm_style_headers():
    exc = _named("RateLimitError", litellm_response_headers={"retry-after": "2.5"})
    assert classify_exception(exc) == ("rate_limit", 2.5)
    bad = _named("RateLimitError", litellm_response_headers={"retry-after": "soon"})
    assert classify_exception(bad) == ("rate_limit", None)
