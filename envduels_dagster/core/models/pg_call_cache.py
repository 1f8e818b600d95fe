"""The call cache on Postgres, for runs on several machines (the shared storage profile).

Why: the SQLite cache (``core/models/call_cache.py``) is a WAL file on local disk, which several machines
cannot share (SQLite warns against network filesystems). Postgres gives every run process the
same cache with row-level concurrency: ``INSERT ... ON CONFLICT DO UPDATE`` makes two processes
that made the same call at once agree (the later write wins; both hold equal responses, since
the key is a hash of the canonical request). Same interface as :class:`CallCache`: ``get``,
``put`` (batched per event-loop iteration), ``flush`` and ``len``.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from envduels_dagster.core.models.cache_batching import BatchedPuts

POSTGRES_PREFIXES = ("postgresql://", "postgres://")
TABLE = "envduels_calls"


def is_postgres(location: str) -> bool:
    return str(location).startswith(POSTGRES_PREFIXES)


class PostgresCallCache(BatchedPuts):
    def __init__(self, dsn: str, table: str = TABLE):
        self.dsn = dsn
        self.table = table
        self._local = threading.local()
        self._init_batching()
        with self._conn().cursor() as cur:
            # CREATE TABLE IF NOT EXISTS can still race in the catalog between two first processes.
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (table,))
            cur.execute(f"CREATE TABLE IF NOT EXISTS {table} "
                        "(key TEXT PRIMARY KEY, model TEXT, response TEXT, created DOUBLE PRECISION)")
        self._conn().commit()

    def _conn(self):
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            import psycopg2

            conn = psycopg2.connect(self.dsn, connect_timeout=30)
            self._local.conn = conn
        return conn

    def get(self, key: str) -> dict[str, Any] | None:
        pending = self.pending(key)
        if pending is not None:
            return pending
        conn = self._conn()
        with conn.cursor() as cur:
            cur.execute(f"SELECT response FROM {self.table} WHERE key = %s", (key,))
            row = cur.fetchone()
        conn.rollback()  # end the read transaction: no snapshot held across model calls
        return json.loads(row[0]) if row else None

    def _write(self, rows: list[tuple]) -> None:
        from psycopg2.extras import execute_values

        conn = self._conn()
        try:
            with conn.cursor() as cur:
                execute_values(cur, f"INSERT INTO {self.table} (key, model, response, created) VALUES %s "
                               "ON CONFLICT (key) DO UPDATE SET model = EXCLUDED.model, "
                               "response = EXCLUDED.response, created = EXCLUDED.created", rows)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise

    def __len__(self) -> int:
        self.flush()
        conn = self._conn()
        with conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {self.table}")
            (count,) = cur.fetchone()
        conn.rollback()
        return count
