"""A batch of calls succeeds whole or is cancelled whole (core/concurrency/gather.py)."""

from __future__ import annotations

import asyncio

import pytest

from envduels_dagster.core.concurrency.gather import gather_or_cancel


def test_results_come_back_in_the_order_given():
    async def after(delay, value):
        await asyncio.sleep(delay)
        return value

    assert asyncio.run(gather_or_cancel([after(0.02, "a"), after(0.0, "b"), after(0.01, "c")])) == ["a", "b", "c"]


def test_the_first_failure_cancels_the_others_before_it_propagates():
    finished, cancelled = [], []

    async def slow(i):
        try:
            await asyncio.sleep(5)
            finished.append(i)
        except asyncio.CancelledError:
            cancelled.append(i)
            raise

    async def fail():
        await asyncio.sleep(0.01)
        raise ValueError("provider said no")

    async def main():
        with pytest.raises(ValueError, match="provider said no"):
            await gather_or_cancel([slow(0), fail(), slow(1)])
        # The siblings were cancelled and awaited before the error reached the caller.
        assert sorted(cancelled) == [0, 1] and finished == []

    asyncio.run(asyncio.wait_for(main(), 2))
