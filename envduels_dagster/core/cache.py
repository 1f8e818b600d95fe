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
import time
from pathlib import Path
from typing import Any


def request_key(request: dict[str, Any]) -> str:
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class CallCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
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
        row = self._conn().execute("SELECT response FROM calls WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, model: str, response: dict[str, Any]) -> None:
        self._conn().execute(
            "INSERT OR REPLACE INTO calls (key, model, response, created) VALUES (?, ?, ?, ?)",
            (key, model, json.dumps(response), time.time()),
        )

    def __len__(self) -> int:
        return self._conn().execute("SELECT COUNT(*) FROM calls").fetchone()[0]
