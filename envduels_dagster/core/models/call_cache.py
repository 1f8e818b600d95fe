"""Persistent cache of model calls, keyed by a hash of the canonical request.

Why SQLite and not the DuckDB warehouse: many processes (parallel Dagster runs)
read and write calls concurrently, and DuckDB allows a single writer per file.
SQLite in WAL mode handles that. A re-run or resumed run pays nothing for calls
already made. Keys and values never contain API keys.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import orjson

from envduels_dagster.core.models import state_files
from envduels_dagster.core.models.cache_batching import BatchedPuts
from envduels_dagster.core.models.state_files import state_file

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


class CallCache(BatchedPuts):
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._local = threading.local()
        self._init_batching()
        with state_file(self.path):  # corrupt, locked, read-only: an error naming the file (issue 44)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._conn() as conn:
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, model TEXT, response TEXT, created REAL)"
                )

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=state_files.BUSY_TIMEOUT_S, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def get(self, key: str) -> dict[str, Any] | None:
        pending = self.pending(key)
        if pending is not None:
            return pending
        with state_file(self.path):
            row = self._conn().execute("SELECT response FROM calls WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def _write(self, rows: list[tuple]) -> None:
        """Write ``rows`` (key, model, response, created) in one transaction."""
        with state_file(self.path):
            self._write_in(rows)

    def _write_in(self, rows: list[tuple]) -> None:
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
    from envduels_dagster.core.models.pg_call_cache import PostgresCallCache, is_postgres

    return PostgresCallCache(str(location)) if is_postgres(str(location)) else CallCache(location)
