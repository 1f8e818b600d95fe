"""In-process provider limits: concurrency per pool and requests per minute, measured on real async calls."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from envduels_dagster.core.models import Gateway
from envduels_dagster.core.models.registry import load_registry

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


def test_max_in_flight_sizes_the_providers_pool_across_models_and_pairs_at_once_fill_it(tmp_path):
    """Issue 35: one pool per provider sized by ``max_in_flight`` (not ``max_concurrency``), shared by every
    pair a run plays at once; the provider's episode slots let as many pairs play as keep that pool full."""
    from envduels_dagster.core.play.pair import Slots, in_flight_limit, provider_slots

    path = tmp_path / "models.yaml"
    path.write_text("""models:
  - name: a
    model: envduels-sim/expert
    pool: remote
    max_concurrency: 2
    max_in_flight: 12
  - name: b
    model: envduels-sim/novice
    pool: remote
    max_in_flight: 12
  - name: c
    model: envduels-sim/oracle
""")
    registry = load_registry(path)
    assert [in_flight_limit(registry.get(n)) for n in "abc"] == [12, 12, 8]
    assert provider_slots(registry, ["a", "b", "c"]) == {"remote": 12, "envduels-sim": 8}

    async def in_play(pairs: list[int], total: int) -> int:  # episodes per pair; the peak of episodes in play
        slots, busy, peak = Slots(total), [0], [0]

        async def episode() -> None:
            async with slots.one():
                busy[0] += 1
                peak[0] = max(peak[0], busy[0])
                assert slots.free == total - busy[0]
                await asyncio.sleep(0.01)
                busy[0] -= 1

        await asyncio.gather(*(episode() for n in pairs for _ in range(n)))
        assert slots.free == total
        return peak[0]

    assert asyncio.run(in_play([4] * 9, 12)) == 12  # 12 slots: 12 episodes at once, whichever pairs they are of
    assert asyncio.run(in_play([20, 1], 8)) == 8
    assert asyncio.run(in_play([2, 3], 8)) == 5  # fewer episodes than slots: all at once
    gateway = Gateway(registry, sim_latency_s=0.05)

    async def main():
        sem = gateway._pool(registry.get("a"))
        observed = []

        async def watch():
            while True:
                observed.append(12 - sem._value)
                await asyncio.sleep(0.005)

        watcher = asyncio.ensure_future(watch())
        await asyncio.gather(*(gateway.chat("a" if i % 2 else "b", MESSAGES, seed=i) for i in range(40)))
        watcher.cancel()
        return max(observed)

    assert 2 < asyncio.run(main()) <= 12  # past a's max_concurrency, never past the provider's max_in_flight


def test_a_pairs_episodes_hold_provider_slots_only_while_they_play_so_the_next_pair_fills_them(sim_registry):
    """Issue 35: each episode holds one of the provider's slots while it plays (``play_pair(slot=...)``); a pair
    no longer keeps its slots until its longest episode ends, so a second pair's episodes start while the first
    pair still plays, and the slots in use never pass the provider's limit."""
    from envduels_dagster.core.authoring.prompts import author_environments
    from envduels_dagster.core.play.episode import PlayConfig, play_pair
    from envduels_dagster.core.play.pair import Slots

    gateway = Gateway(load_registry(sim_registry(["journeyman", "apprentice"])), sim_latency_s=0.01)
    envs = asyncio.run(author_environments(gateway, "journeyman", 2, [0, 1, 2]))
    episodes = 2 * sum(len(e.benchmark_seeds) for e in envs if e.valid)
    assert episodes >= 6
    slots, held, peak, spans = Slots(3), [0], [0], {"a": [], "b": []}

    def slot_for(pair):
        @contextlib.asynccontextmanager
        async def one():
            async with slots.one():
                held[0] += 1
                peak[0] = max(peak[0], held[0])
                start = time.perf_counter()
                try:
                    yield
                finally:
                    held[0] -= 1
                    spans[pair].append((start, time.perf_counter()))
        return one

    async def both():
        return await asyncio.gather(*(play_pair(gateway, "apprentice", envs, PlayConfig(concurrency=8, slot=slot_for(p)))
                                      for p in ("a", "b")))

    a, b = asyncio.run(both())
    assert len(a) == len(b) == episodes and len(spans["a"]) == len(spans["b"]) == episodes
    assert peak[0] == 3 and slots.free == 3  # the limit is used in full and never passed
    # pair b's first episode starts before pair a's last one ends (holding its width, a waited for b or b for a)
    first_b, last_a = min(s for s, _ in spans["b"]), max(e for _, e in spans["a"])
    first_a, last_b = min(s for s, _ in spans["a"]), max(e for _, e in spans["b"])
    assert first_b < last_a and first_a < last_b
