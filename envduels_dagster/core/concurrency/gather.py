"""Await several coroutines as one unit: all results, or the first failure with the rest cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import TypeVar

T = TypeVar("T")


async def gather_or_cancel(awaitables: Iterable[Awaitable[T]]) -> list[T]:
    """Await ``awaitables`` together and return their results in order.

    On the first failure (or when the caller is cancelled) every other task is cancelled and awaited
    before the failure propagates unchanged, so no call keeps running, or spending, after its batch
    has failed.
    """
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
