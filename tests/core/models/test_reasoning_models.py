"""Reasoning models as users configure them: per-model timeouts, provider options in the request body,
reasoning tokens counted and priced apart, finish_reason kept, and a reply cut at max_tokens ending the
episode as ``length`` (incomplete), never as the solver's format error. Against real serve-sim servers."""

from __future__ import annotations

import asyncio
import time

import pytest

from envduels_dagster.core.models import Gateway, LLMError, RetryPolicy
from envduels_dagster.core.models.registry import load_registry
from envduels_dagster.core.play.episode import play_episode
from envduels_dagster.core.protocol import EnvironmentSpec
from tests.helpers.environments import UNKNOWN
from tests.helpers.sim_server import MESSAGES, SimServerProcess, health, thinker_registry

PARAMS = "    params: {reasoning_effort: high, top_p: 0.9, extra_body: {thinking: {type: enabled, budget_tokens: 64}}}\n"


@pytest.fixture(scope="module")
def reasoning_server():
    srv = SimServerProcess("--reasoning-tokens", "300", "--latency-ms", "1")
    yield srv
    srv.stop()



@pytest.mark.parametrize("client", ["fast", "litellm", "litellm-full"])
def test_params_reach_the_body_and_reasoning_tokens_are_counted_and_priced_apart(reasoning_server, tmp_path,
                                                                                  client):
    registry = thinker_registry(tmp_path, reasoning_server.base, client, "    max_tokens: 4000\n" + PARAMS)
    gateway = Gateway(registry)

    async def main():
        try:
            return await gateway.chat("thinker", MESSAGES, seed=3)
        finally:
            await gateway.aclose()

    reply = asyncio.run(main())
    options = health(reasoning_server)["last_options"]
    assert options["reasoning_effort"] == "high" and options["top_p"] == 0.9
    assert options["thinking"] == {"type": "enabled", "budget_tokens": 64}  # extra_body: top-level body fields
    assert reply.finish_reason == "stop" and reply.reasoning_tokens == 300
    visible = reply.completion_tokens - 300
    assert visible > 0
    assert reply.cost_usd == pytest.approx((reply.prompt_tokens * 1 + visible * 4 + 300 * 10) / 1e6)


def test_params_are_part_of_the_cache_key(tmp_path):
    from envduels_dagster.core.models.call_cache import CallCache

    cache = CallCache(tmp_path / "calls.sqlite")
    path = tmp_path / "models.yaml"
    for params in ("", "    params: {top_p: 0.5}\n"):
        path.write_text(f"models:\n  - name: m\n    model: envduels-sim/novice\n{params}")
        asyncio.run(Gateway(load_registry(path), cache).chat("m", MESSAGES, seed=0))
    assert len(cache) == 2  # other options, another call (a cached reply is never served across them)


@pytest.mark.parametrize("client", ["fast", "litellm", "litellm-full"])
def test_a_reply_cut_at_max_tokens_ends_the_episode_as_length_not_a_format_error(reasoning_server, tmp_path,
                                                                                  client):
    registry = thinker_registry(tmp_path, reasoning_server.base, client, "    max_tokens: 310\n")
    spec = EnvironmentSpec(env_id="crossroads", author="test", class_name="Crossroads", max_turns=6,
                           source=UNKNOWN, hint="h", benchmark_seeds=[0])
    gateway = Gateway(registry)

    async def main():
        try:
            return await play_episode(gateway, "thinker", spec, 0, "cold")
        finally:
            await gateway.aclose()

    rec = asyncio.run(main())
    assert (rec.status, rec.stop_reason, rec.format_errors) == ("incomplete", "length", 0)
    assert rec.finish_reasons == ["length"] and rec.reasoning_tokens == 300 and rec.completion_tokens == 310
    assert "raise max_tokens for thinker" in rec.error


def test_the_pair_metadata_counts_cut_replies_apart():
    import pandas as pd

    from envduels_dagster.core.play.pair import cut_replies

    df = pd.DataFrame({"stop_reason": ["length", "terminated", "length"], "reasoning_tokens": [300, 0, 300]})
    out = cut_replies(df, "thinker")
    assert out["cut_at_max_tokens"] == 2 and out["reasoning_tokens"] == 600
    assert "raise max_tokens for thinker" in out["cut_at_max_tokens_advice"]
    assert "cut_at_max_tokens_advice" not in cut_replies(df.iloc[[1]], "thinker")


@pytest.mark.parametrize("client", ["fast", "litellm", "litellm-full"])
def test_the_entrys_timeout_bounds_each_call(tmp_path, client):
    srv = SimServerProcess("--latency-ms", "3000")
    try:
        registry = thinker_registry(tmp_path, srv.base, client, "    timeout_s: 0.5\n")
        gateway = Gateway(registry, policy=RetryPolicy(max_attempts=1, timeout_s=60))  # the entry's wins
        assert gateway.timeout_s(registry.get("thinker")) == 0.5

        async def main():
            try:
                await gateway.chat("thinker", MESSAGES, seed=0)
            finally:
                await gateway.aclose()

        t0 = time.perf_counter()
        with pytest.raises(LLMError) as exc:
            asyncio.run(main())
        assert exc.value.error_class == "timeout" and time.perf_counter() - t0 < 2.5
    finally:
        srv.stop()
    default = load_registry(thinker_registry(tmp_path, srv.base, client).path).get("thinker")
    assert Gateway(load_registry(thinker_registry(tmp_path, srv.base, client).path),
                   policy=RetryPolicy(timeout_s=42)).timeout_s(default) == 42  # unset: the resource's policy
