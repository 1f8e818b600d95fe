"""Provider limits held across every run and process: one schedule per provider pool, in shared storage.

Why shared: a provider's requests- and tokens-per-minute limits belong to the *account*, while Dagster
runs several runs at once, each in its own process with its own gateway. A limiter inside one gateway
lets two runs exceed the account's limit twice over (answered by 429s and backoff). So every gateway of
an instance reserves its calls in one schedule: a SQLite file beside the call cache (the default
profile), a table in the shared profile's Postgres, or memory (tests, one-off commands).

The schedule (per pool) is three instants: the earliest start of the next request (``req_next``, spaced
``60 / rpm`` apart), of the next token (``tok_next``, a call moves it by its tokens x ``60 / tpm``), and
a hold set by a 429 (``hold_until``, from Retry-After). A reservation is one short transaction: start =
max(now, req_next, tok_next, hold_until), then both instants move past it; the caller sleeps until its
start. Tokens are reserved as the prompt's estimate and settled with the provider's count after the reply
(a long completion pushes the next call back). Even spacing with no burst, like the per-run limiter it
replaces: a schedule never exceeds the limit over any window, whichever process calls.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Protocol

from envduels_dagster.core.models import state_files
from envduels_dagster.core.models.state_files import state_file

POSTGRES_TABLE = "envduels_provider_limits"
SQLITE_NAME = "provider_limits.sqlite"


def plan(state: tuple[float, float, float], now: float, rpm: float | None, tpm: float | None,
         tokens: int) -> tuple[float, tuple[float, float, float]]:
    """(start, new state) of one reservation: the single rule every storage applies in its transaction."""
    req_next, tok_next, hold_until = state
    start = max(now, req_next, tok_next, hold_until)
    if rpm:
        req_next = start + 60.0 / rpm
    if tpm:
        tok_next = start + max(0, tokens) * 60.0 / tpm
    return start, (req_next, tok_next, hold_until)


class ProviderLimiter(Protocol):
    """A schedule shared by every gateway that opens the same storage."""

    def reserve(self, pool: str, rpm: float | None, tpm: float | None, tokens: int) -> float:
        """Reserve one call's slot; return the seconds to wait before making it."""
        ...

    def settle(self, pool: str, tpm: float, extra_tokens: int) -> None:
        """Move the pool's token schedule by the tokens a call used beyond (or below) its reservation."""
        ...

    def hold(self, pool: str, seconds: float) -> None:
        """No call of the pool starts in the next ``seconds`` (a 429's Retry-After), in any process."""
        ...


class MemoryLimiter:
    """The schedule in this process only (tests, and gateways opened without shared storage)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: dict[str, tuple[float, float, float]] = {}

    def reserve(self, pool: str, rpm: float | None, tpm: float | None, tokens: int) -> float:
        with self._lock:
            now = time.time()
            start, self._state[pool] = plan(self._state.get(pool, (0.0, 0.0, 0.0)), now, rpm, tpm, tokens)
        return start - now

    def settle(self, pool: str, tpm: float, extra_tokens: int) -> None:
        with self._lock:
            req, tok, hold = self._state.get(pool, (0.0, 0.0, 0.0))
            self._state[pool] = (req, tok + extra_tokens * 60.0 / tpm, hold)

    def hold(self, pool: str, seconds: float) -> None:
        with self._lock:
            req, tok, hold = self._state.get(pool, (0.0, 0.0, 0.0))
            self._state[pool] = (req, tok, max(hold, time.time() + seconds))


class SqliteLimiter:
    """The schedule in a SQLite file (WAL): every process of one machine that opens it shares it."""

    def __init__(self, path: str | Path):
        self.path = Path(path)  # opened on the first limited call: a run without limits never touches it
        self._local = threading.local()

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=state_files.BUSY_TIMEOUT_S, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("CREATE TABLE IF NOT EXISTS limits (pool TEXT PRIMARY KEY, req_next REAL NOT NULL, "
                         "tok_next REAL NOT NULL, hold_until REAL NOT NULL)")
            self._local.conn = conn
        return conn

    def _update(self, pool: str, change) -> float:
        with state_file(self.path):  # corrupt, locked, read-only: an error naming the file (issue 44)
            return self._update_in(pool, change)

    def _update_in(self, pool: str, change) -> float:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")  # the write lock first: two processes never read the same state
        try:
            row = conn.execute("SELECT req_next, tok_next, hold_until FROM limits WHERE pool = ?", (pool,)).fetchone()
            now = time.time()
            result, state = change(tuple(row) if row else (0.0, 0.0, 0.0), now)
            conn.execute("INSERT OR REPLACE INTO limits VALUES (?, ?, ?, ?)", (pool, *state))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    def reserve(self, pool: str, rpm: float | None, tpm: float | None, tokens: int) -> float:
        def change(state, now):
            start, new = plan(state, now, rpm, tpm, tokens)
            return start - now, new
        return self._update(pool, change)

    def settle(self, pool: str, tpm: float, extra_tokens: int) -> None:
        self._update(pool, lambda s, now: (0.0, (s[0], s[1] + extra_tokens * 60.0 / tpm, s[2])))

    def hold(self, pool: str, seconds: float) -> None:
        self._update(pool, lambda s, now: (0.0, (s[0], s[1], max(s[2], now + seconds))))


class PostgresLimiter(SqliteLimiter):
    """The schedule in a table of the shared profile's Postgres: every process of every machine shares it.

    "Now" is the server's clock (``clock_timestamp()``), so machines whose clocks differ agree on the schedule.
    """

    def __init__(self, dsn: str, table: str = POSTGRES_TABLE):
        self.dsn, self.table = dsn, table  # connected on the first limited call
        self._local = threading.local()

    def _conn(self):  # type: ignore[override]
        return thread_postgres(self._local, self.dsn, self.table, "pool TEXT PRIMARY KEY, req_next DOUBLE PRECISION "
                               "NOT NULL, tok_next DOUBLE PRECISION NOT NULL, hold_until DOUBLE PRECISION NOT NULL")

    def _update(self, pool: str, change) -> float:
        conn = self._conn()
        try:
            with conn.cursor() as cur:
                cur.execute(f"INSERT INTO {self.table} VALUES (%s, 0, 0, 0) ON CONFLICT (pool) DO NOTHING", (pool,))
                cur.execute(f"SELECT req_next, tok_next, hold_until, extract(epoch FROM clock_timestamp()) "
                            f"FROM {self.table} WHERE pool = %s FOR UPDATE", (pool,))
                *state, now = (float(x) for x in cur.fetchone())
                result, new = change(tuple(state), now)
                cur.execute(f"UPDATE {self.table} SET req_next = %s, tok_next = %s, hold_until = %s WHERE pool = %s",
                            (*new, pool))
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        return result


def open_limiter(cache_location: str | Path | None) -> ProviderLimiter:
    """The limiter beside the call cache: the same Postgres for a ``postgresql://`` cache, else a SQLite file
    in the cache's directory; memory when there is no cache."""
    if cache_location is None:
        return MemoryLimiter()
    from envduels_dagster.core.models.pg_call_cache import is_postgres

    if is_postgres(str(cache_location)):
        return PostgresLimiter(str(cache_location))
    return SqliteLimiter(Path(cache_location).parent / SQLITE_NAME)


def thread_postgres(local: threading.local, dsn: str, table: str, columns: str):
    """This thread's connection to the shared profile's Postgres (kept in ``local``), ``table`` created with
    ``columns`` on first use: the rate limits' and the in-flight queue's store (core/models/in_flight.py)."""
    conn = getattr(local, "conn", None)
    if conn is None or conn.closed:
        import psycopg2

        conn = psycopg2.connect(dsn, connect_timeout=30)
        with conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (table,))  # CREATE IF NOT EXISTS races
            cur.execute(f"CREATE TABLE IF NOT EXISTS {table} ({columns})")
        conn.commit()
        local.conn = conn
    return conn
