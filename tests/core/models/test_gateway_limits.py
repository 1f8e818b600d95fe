"""In-process provider limits: concurrency per pool and requests per minute, measured on real async calls."""

from __future__ import annotations

import asyncio
import time

import pytest

from envduels_dagster.core.models import Gateway
from envduels_dagster.core.registry import load_registry

MESSAGES = [{"role": "system", "content": "x"},
            {"role": "user", "content": "Observation: I am thinking of an integer between 1 and 100. Guess it."}]


@pytest.mark.slow  # about a second or more (--durations, 1 Dec 2026): kept out of the inner loop
def test_pool_concurrency_and_rate_limit_hold_across_models_of_one_provider(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text("""models:
  - name: a
    model: envduels-sim/expert
    pool: shared
    max_concurrency: 3
    requests_per_minute: 1200
  - name: b
    model: envduels-sim/novice
    pool: shared
    max_concurrency: 3
    requests_per_minute: 1200
""")
    gateway = Gateway(load_registry(path), sim_latency_s=0.05)

    async def main():
        sem = gateway._pool(load_registry(path).get("a"))  # the pool both models share
        observed = []

        async def watch():
            while True:
                observed.append(3 - sem._value)  # calls holding a slot right now
                await asyncio.sleep(0.005)

        watcher = asyncio.ensure_future(watch())
        t0 = time.perf_counter()
        await asyncio.gather(*(gateway.chat("a" if i % 2 else "b", MESSAGES, seed=i) for i in range(20)))
        elapsed = time.perf_counter() - t0
        watcher.cancel()
        return elapsed, max(observed)

    elapsed, max_busy = asyncio.run(main())
    assert 1 <= max_busy <= 3  # never more than the pool's max_concurrency in flight
    # 1200/min = one request per 50 ms for the whole pool: 20 requests need at least 19 intervals.
    assert elapsed >= 19 * 0.05 * 0.95
    assert sum(gateway.stats.backend_calls.values()) == 20
