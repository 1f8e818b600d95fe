"""The write batching every call cache shares (SQLite ``cache.py``, Postgres ``pg_cache.py``).

Why a module of its own: both caches build on it and ``cache.open_call_cache`` chooses between
them; with the base class inside ``cache.py`` the two cache modules imported each other.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import orjson


class BatchedPuts:
    """The write batching every call cache shares: ``put`` queues a row, ``flush`` hands the queue to
    ``_write`` (one transaction, the backend's own). Inside an event loop, the writes of one loop
    iteration share one transaction (flushed by a ``call_soon`` callback, so before ``asyncio.run``
    returns): a commit per call costs ~40 us of the event loop's time. Outside a loop the row is
    written at once. Subclasses call ``_init_batching()`` and implement ``_write``."""

    def _init_batching(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, tuple] = {}
        self._flush_loop: asyncio.AbstractEventLoop | None = None

    def _write(self, rows: list[tuple]) -> None:
        raise NotImplementedError

    def pending(self, key: str) -> dict[str, Any] | None:
        row = self._pending.get(key)
        return orjson.loads(row[2]) if row is not None else None

    def put(self, key: str, model: str, response: dict[str, Any]) -> None:
        """Store a call (batched as the class docstring says)."""
        row = (key, model, orjson.dumps(response).decode(), time.time())
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with self._lock:
            self._pending[key] = row
            # (re)schedule unless a flush is already due in this loop (a loop that ended before
            # running it leaves its rows here: the next loop's flush writes them too)
            schedule = loop is not None and self._flush_loop is not loop
            if schedule:
                self._flush_loop = loop
        if loop is None:
            self.flush()
        elif schedule:
            loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write every pending row in one transaction."""
        with self._lock:
            rows, self._pending, self._flush_loop = list(self._pending.values()), {}, None
        if rows:
            self._write(rows)
