"""Persistent cache of model calls, keyed by a hash of the canonical request.

Why SQLite and not the DuckDB warehouse: many processes (parallel Dagster runs)
read and write calls concurrently, and DuckDB allows a single writer per file.
SQLite in WAL mode handles that. A re-run or resumed run pays nothing for calls
already made. Keys and values never contain API keys.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import orjson

_ORJSON_SAFE = (str, int, bool, type(None))  # types whose orjson output equals json.dumps(ensure_ascii=False)


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _plain_messages(messages: list) -> bool:
    for m in messages:
        if type(m) is not dict:
            return False
        for v in m.values():
            if type(v) is not str:
                return False
    return True


def request_key(request: dict[str, Any]) -> str:
    """SHA-256 of the request as compact, key-sorted JSON (``json.dumps(..., sort_keys=True)``).

    Strings, ints, booleans, None and lists of string-only dicts (the messages, the long
    part) are encoded with orjson, whose output for them is byte-identical to
    ``json.dumps(ensure_ascii=False)`` (checked for every code point): the same keys as
    before, at a fraction of the CPU. Floats and anything nested go through ``json``.
    """
    parts = [b"{"]
    for name in sorted(request):
        value = request[name]
        if len(parts) > 1:
            parts.append(b",")
        parts.append(orjson.dumps(name) + b":" if type(name) is str else _canonical(name) + b":")
        try:
            if type(value) in _ORJSON_SAFE or (type(value) is list and _plain_messages(value)):
                parts.append(orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
                continue
        except (TypeError, orjson.JSONEncodeError):  # lone surrogates, ints beyond 64 bits
            pass
        parts.append(_canonical(value))
    parts.append(b"}")
    return hashlib.sha256(b"".join(parts)).hexdigest()


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


class CallCache(BatchedPuts):
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._init_batching()
        with self._conn() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, model TEXT, response TEXT, created REAL)"
            )

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def get(self, key: str) -> dict[str, Any] | None:
        pending = self.pending(key)
        if pending is not None:
            return pending
        row = self._conn().execute("SELECT response FROM calls WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def _write(self, rows: list[tuple]) -> None:
        """Write ``rows`` (key, model, response, created) in one transaction."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("INSERT OR REPLACE INTO calls (key, model, response, created) VALUES (?, ?, ?, ?)",
                             rows)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def __len__(self) -> int:
        self.flush()
        return self._conn().execute("SELECT COUNT(*) FROM calls").fetchone()[0]


def open_call_cache(location: str | Path):
    """The call cache at ``location``: a ``postgresql://`` URL (shared profile) or a SQLite file path."""
    from envduels_dagster.core.pg_cache import PostgresCallCache, is_postgres

    return PostgresCallCache(str(location)) if is_postgres(str(location)) else CallCache(location)
