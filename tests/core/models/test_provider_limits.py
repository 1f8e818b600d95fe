"""Provider limits shared by every gateway and process: the schedule in SQLite (and Postgres), 429 holds,
tokens per minute, against real `envduels serve-sim` servers that hold an account's limit themselves."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from envduels_dagster.core.models import Gateway, LLMError, MemoryLimiter, RetryPolicy, open_limiter
from envduels_dagster.core.models.limits import PostgresLimiter, SqliteLimiter, plan
from envduels_dagster.core.models.registry import load_registry
from tests.helpers.sim_server import MESSAGES, SimServerProcess, health


def registry_for(tmp_path, base: str, extra: str = "", name: str = "models.yaml"):
    path = tmp_path / name
    path.write_text(f"""models:
  - name: remote
    model: openai/novice
    api_base: {base}
    client: fast
{extra}""")
    return load_registry(path)


def test_the_schedule_spaces_requests_and_tokens_and_honours_a_hold():
    state = (0.0, 0.0, 0.0)
    start, state = plan(state, 100.0, 600, None, 50)
    assert start == 100.0 and state[0] == pytest.approx(100.1)  # 600/min: one request per 0.1 s
    start, state = plan(state, 100.0, 600, None, 50)
    assert start == pytest.approx(100.1)  # the second waits its turn
    start, state = plan((0.0, 0.0, 0.0), 100.0, None, 6000, 500)
    assert start == 100.0 and state[1] == pytest.approx(105.0)  # 500 tokens at 6000/min take 5 s of the budget
    start, _ = plan((0.0, 0.0, 130.0), 100.0, 600, 6000, 1)
    assert start == 130.0  # a 429's hold beats both schedules


RESERVE = """
import sys
from envduels_dagster.core.models.limits import SqliteLimiter, plan
lim = SqliteLimiter(sys.argv[1])
# reserve() as it is, but returning the absolute start the transaction planned (exact, unlike a clock read after)
print(" ".join(repr(lim._update("acct", lambda s, now: plan(s, now, 600, None, 0))) for _ in range(15)))
"""


def test_two_processes_share_one_schedule_in_the_sqlite_file(tmp_path):
    path = tmp_path / "cache" / "provider_limits.sqlite"
    procs = [subprocess.Popen([sys.executable, "-c", RESERVE, str(path)], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    starts = sorted(float(x) for p in procs for x in p.communicate(timeout=60)[0].split())
    assert len(starts) == 30 and all(p.returncode == 0 for p in procs)
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert min(gaps) >= 0.1 - 1e-6  # 600/min for both processes together, never 600/min each


def test_a_hold_reaches_every_limiter_on_the_same_file_and_tokens_settle(tmp_path):
    a, b = SqliteLimiter(tmp_path / "l.sqlite"), SqliteLimiter(tmp_path / "l.sqlite")
    a.hold("acct", 3.0)
    assert b.reserve("acct", None, None, 0) == pytest.approx(3.0, abs=0.3)  # another process's 429 holds us
    assert b.reserve("other", None, None, 0) == 0.0  # pools are independent
    b.reserve("tpm", None, 60_000, 100)  # 100 tokens at 1000/s reserved ...
    a.settle("tpm", 60_000, 1900)  # ... but the reply used 2000: the next call waits ~2 s
    assert a.reserve("tpm", None, 60_000, 0) == pytest.approx(2.0, abs=0.3)


def test_the_limiter_lives_beside_the_call_cache(tmp_path):
    limiter = open_limiter(tmp_path / "home" / "cache" / "calls.sqlite")
    assert isinstance(limiter, SqliteLimiter) and limiter.path == tmp_path / "home" / "cache" / "provider_limits.sqlite"
    assert not limiter.path.exists()  # opened on the first limited call only
    assert isinstance(open_limiter("postgresql://u@127.0.0.1:1/db"), PostgresLimiter)  # connects lazily too
    assert isinstance(open_limiter(None), MemoryLimiter)


def test_two_gateways_sharing_the_limiter_stay_under_the_servers_limit_and_separate_ones_do_not(tmp_path):
    # one request per 50 ms for the account, 8 at once: slack for a loaded machine stalling the server's own
    # loop (requests queued during a stall are counted at one instant)
    srv = SimServerProcess("--rpm", "1200", "--rpm-burst", "8")
    try:
        registry = registry_for(tmp_path, srv.base, "    requests_per_minute: 1200\n    max_concurrency: 4\n")

        async def run(limiters):
            gateways = [Gateway(registry, policy=RetryPolicy(max_attempts=8, base_delay_s=0.05), limiter=lim)
                        for lim in limiters]
            t0 = time.perf_counter()
            await asyncio.gather(*(g.chat("remote", MESSAGES, seed=i) for g in gateways for i in range(10)))
            for g in gateways:
                await g.aclose()
            return time.perf_counter() - t0, sum(g.stats.errors["rate_limit"] for g in gateways)

        shared = SqliteLimiter(tmp_path / "limits.sqlite")
        elapsed, rate_limited = asyncio.run(run([shared, SqliteLimiter(tmp_path / "limits.sqlite")]))
        after_shared = health(srv)["over_rpm"]
        assert after_shared == 0 and rate_limited == 0  # 20 calls, one schedule: the server never said 429
        assert elapsed >= 19 * 0.05 * 0.9
        # the old per-run limiters: three runs at the account's rate each, 30 calls where 8 + 10 fit
        _, rate_limited = asyncio.run(run([MemoryLimiter(), MemoryLimiter(), MemoryLimiter()]))
        assert health(srv)["over_rpm"] > 0 and rate_limited > 0
    finally:
        srv.stop()


def test_a_429_holds_the_whole_pool_for_its_retry_after(tmp_path):
    srv = SimServerProcess("--rpm", "60", "--latency-ms", "1")  # one a second; Retry-After says how long
    try:
        registry = registry_for(tmp_path, srv.base)  # no rpm in the registry: the provider's 429 teaches it

        async def main():
            gateway = Gateway(registry, policy=RetryPolicy(max_attempts=1), limiter=MemoryLimiter())
            await gateway.chat("remote", MESSAGES, seed=0)
            with pytest.raises(LLMError) as exc:
                await gateway.chat("remote", MESSAGES, seed=1)  # over the limit: 429, no retry left
            assert exc.value.error_class == "rate_limit"
            t0 = time.perf_counter()
            await gateway.chat("remote", MESSAGES, seed=2)  # another call of the pool waits out the hold
            waited = time.perf_counter() - t0
            await gateway.aclose()
            return waited

        waited = asyncio.run(main())
        assert waited >= 0.5  # held until the Retry-After (~1 s) instead of being refused again
        assert health(srv)["over_rpm"] == 1
    finally:
        srv.stop()


def test_a_postgres_limiter_is_shared_by_two_connections():
    from tests.helpers.postgres import LocalPostgres, PostgresUnavailable

    try:
        pg = LocalPostgres().start()
    except PostgresUnavailable as exc:
        pytest.skip(str(exc))
    try:
        url = pg.url("postgres")
        a, b = PostgresLimiter(url), PostgresLimiter(url)
        # reserve() as it is, returning the planned start (the server's clock) instead of a wait: exact under load
        starts = [lim._update("acct", lambda s, now: plan(s, now, 600, None, 0)) for lim in (a, b) * 5]
        assert min(y - x for x, y in zip(starts, starts[1:], strict=False)) >= 0.1 - 1e-6  # one schedule
        a.hold("acct", 5)
        assert b.reserve("acct", 600, None, 0) >= 4.5
    finally:
        pg.stop()


def test_tokens_per_minute_spaces_calls_by_the_tokens_the_replies_used(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - name: m\n    model: envduels-sim/novice\n    tokens_per_minute: 6000\n")
    gateway = Gateway(load_registry(path))  # 100 tokens a second for the pool

    async def main():
        t0 = time.perf_counter()
        replies = [await gateway.chat("m", MESSAGES, seed=i) for i in range(3)]
        return time.perf_counter() - t0, replies

    elapsed, replies = asyncio.run(main())
    used = [r.prompt_tokens + r.completion_tokens for r in replies]
    # the third call starts once the first two calls' tokens fit the budget (settled with the real counts)
    assert elapsed >= (used[0] + used[1]) / 100 * 0.95
    assert sum(gateway.stats.backend_calls.values()) == 3
