"""A provider that never answers costs a bounded time per call (issue 33 item 8: 5 x 60 s timeouts, 310 s a
call, before): a timed-out attempt is retried once, and the attempts of one call share a deadline of
``deadline_factor x timeout_s`` waiting on the provider. Against a real serve-sim server that hangs, through
both HTTP clients (litellm and the lean one), with the retry policy's defaults."""

from __future__ import annotations

import asyncio
import time

import pytest

from envduels_dagster.core.models import Gateway, LLMError, RetryPolicy
from envduels_dagster.core.models.gateway import _out_of_time
from envduels_dagster.core.play.episode import play_episode
from envduels_dagster.core.protocol import EnvironmentSpec
from tests.helpers.environments import UNKNOWN
from tests.helpers.sim_server import MESSAGES, SimServerProcess, thinker_registry

TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def hanging_server():
    srv = SimServerProcess("--latency-ms", "3600000")  # answers after an hour: a provider that hangs
    yield srv
    srv.stop()


@pytest.mark.parametrize("client", ["fast", "litellm", "litellm-full"])
def test_a_hanging_provider_costs_two_timeouts_a_call_and_the_episode_stores_why(hanging_server, tmp_path, client):
    registry = thinker_registry(tmp_path, hanging_server.base, client, f"    timeout_s: {TIMEOUT_S}\n")
    gateway = Gateway(registry)  # the defaults: 5 attempts, 0.5 s first backoff (before: 5 timeouts + 7.5 s)
    spec = EnvironmentSpec(env_id="crossroads", author="test", class_name="Crossroads", max_turns=6,
                           source=UNKNOWN, hint="h", benchmark_seeds=[0])

    async def main():
        try:
            with pytest.raises(LLMError) as raised:
                await gateway.chat("thinker", MESSAGES, seed=0)
            t0 = time.perf_counter()
            rec = await play_episode(gateway, "thinker", spec, 0, "cold")
            return raised.value, rec, time.perf_counter() - t0
        finally:
            await gateway.aclose()

    error, rec, elapsed = asyncio.run(main())
    assert (error.error_class, error.attempts, error.retried_errors) == ("timeout", 2, ["timeout"]), str(error)
    assert "gave up after 2 timed-out attempts (timeout_s 1, at most 2 per call)" in str(error)
    # two attempts of 1 s and one backoff of 0.5 s +-25 %; before: 5 x 1 s + 7.5 s of backoff
    assert 2 * TIMEOUT_S <= elapsed < 2 * TIMEOUT_S + 0.63 + 1.5  # + slack for a loaded machine
    assert (rec.status, rec.stop_reason) == ("incomplete", "llm_error")  # not the solver's failure
    assert rec.error.startswith("timeout after 2 attempt(s)") and "gave up after 2 timed-out attempts" in rec.error
    assert gateway.stats.errors["timeout"] == 4 and not gateway.stats.backend_calls  # nothing answered, none cached


def test_the_attempts_of_a_call_share_its_deadline():
    policy = RetryPolicy()
    assert _out_of_time(policy, 60, 119, ["server_error"]) == ""  # fast failures: retried as before
    assert _out_of_time(policy, 60, 60, ["timeout"]) == ""  # one timeout: retried once
    assert "gave up after 2 timed-out attempts" in _out_of_time(policy, 60, 59, ["timeout", "timeout"])
    spent = _out_of_time(policy, 60, 1, ["server_error", "timeout", "server_error"])  # 119 s of slow 500s
    assert spent == "; gave up: the call's deadline (2 x timeout_s = 120 s waiting on the provider) is spent"
    assert _out_of_time(RetryPolicy(max_timeouts=5, deadline_factor=5), 60, 120, ["timeout"] * 3) == ""
