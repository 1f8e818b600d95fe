"""A provider's ``max_in_flight`` held across every run and process: a queue of tickets in shared storage.

Why shared: a provider that limits calls in flight (self-hosted vLLM, some APIs) limits the *account*, while
the daemon splits a stage's pairs into several runs, each a process with its own gateway. A semaphore in each
gateway lets N runs put N times the limit in flight (answered by 429s or queued by the provider). So every
gateway whose limiter lives in shared storage (limits.py: SQLite beside the call cache, the shared profile's
Postgres) takes its slots from one table, the same storage as the rate limits.

The table is a FIFO queue per pool: a call enqueues a ticket, and every poll (one transaction) grants the
oldest waiting tickets of the pool while fewer than ``limit`` are granted, whichever process holds them; a
process's poller then starts the calls of its granted tickets. A call deletes its ticket when its attempt
ends, and wakes its own process's poller at once (the next ticket in line is granted without waiting for a
poll interval); other processes see the free slot at their next poll (``POLL_S``). First come, first served
across runs: one run cannot keep the slots its calls release while another run waits.

Slots are released when their holder dies: a ticket records its host, pid and the pid's start time (pids are
reused), and any poll on the same host deletes the tickets of processes that are gone. Each ticket also
carries a lease (a granted one: the attempt's timeout plus ``LEASE_MARGIN_S``; a waiting one: renewed by
every poll of its process), so the ticket of a process on another machine of the shared profile is freed
when its lease ends.

Which calls: remote models whose registry entry sets ``max_in_flight`` (the provider's limit). A pool with
only ``max_concurrency`` keeps its per-run semaphore (a run's own knob, not an account's), and a gateway
without shared storage (tests, one-off commands) holds ``max_in_flight`` in its semaphore, as before.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import threading
import time
from pathlib import Path
from typing import Protocol

POLL_S = 0.01  # how often a process with waiting calls looks for slots freed by other processes
WAIT_LEASE_S = 30.0  # a waiting ticket not renewed by its process's polls for this long is dropped
LEASE_MARGIN_S = 30.0  # a granted ticket outlives its attempt's timeout by this much (a starved event loop)
POSTGRES_TABLE = "envduels_in_flight"


def process_start(pid: int) -> str:
    """The process's start time (clock ticks since boot, /proc/PID/stat field 22): a pid reused by a new
    process is a different holder. "" where /proc is not available (then the pid alone identifies it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat[stat.rindex(")") + 2:].split()[19]  # after "pid (comm) ": state is field 3, starttime 22


def alive(pid: int, start: str) -> bool:
    """Whether the process that took a ticket on this host still runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    return not start or process_start(pid) in (start, "")


class Holder:
    """This process, as its tickets record it (computed per process: a forked child is a new holder)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.host = socket.gethostname()
        self.start = process_start(self.pid)


_holder: Holder | None = None


def holder() -> Holder:
    global _holder
    if _holder is None or _holder.pid != os.getpid():
        _holder = Holder()
    return _holder


class SlotStoreError(RuntimeError):
    """The shared storage of calls in flight cannot be used (the message names it and what to do)."""


class SlotStore(Protocol):
    """Tickets of calls in flight, shared by every process that opens the same storage."""

    def enqueue(self, pool: str) -> int:
        """A waiting ticket at the end of the pool's queue."""
        ...

    def poll(self, pool: str, limit: int, mine: list[int], lease_s: float) -> set[int]:
        """Reap dead holders, grant the oldest waiting tickets while fewer than ``limit`` are granted, renew
        ``mine`` (this process's waiting tickets); return those of ``mine`` that are granted."""
        ...

    def release(self, tickets: list[int]) -> None:
        """Delete tickets (a call's attempt ended, or its wait was cancelled)."""
        ...


class SqliteSlots:
    """The queue in a table of the limiter's SQLite file (WAL): every process of one machine shares it."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._local = threading.local()

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("CREATE TABLE IF NOT EXISTS in_flight (ticket INTEGER PRIMARY KEY AUTOINCREMENT, "
                         "pool TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, pid_start TEXT NOT NULL, "
                         "granted INTEGER NOT NULL, lease_until REAL NOT NULL)")
            self._local.conn = conn
        return conn

    def _tx(self, work):
        try:
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")  # the write lock first: two pollers never grant the same slot
        except (OSError, sqlite3.Error) as exc:
            raise SlotStoreError(f"{self.path}: cannot hold max_in_flight's slots there ({type(exc).__name__}: "
                                 f"{exc}); the call cache's directory must be a writable directory "
                                 "(ENVDUELS_HOME/cache)") from None
        try:
            result = work(conn, time.time())
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    def enqueue(self, pool: str) -> int:
        me = holder()
        return self._tx(lambda conn, now: conn.execute(
            "INSERT INTO in_flight (pool, host, pid, pid_start, granted, lease_until) VALUES (?, ?, ?, ?, 0, ?)",
            (pool, me.host, me.pid, me.start, now + WAIT_LEASE_S)).lastrowid)

    def poll(self, pool: str, limit: int, mine: list[int], lease_s: float) -> set[int]:
        me = holder()

        def work(conn: sqlite3.Connection, now: float) -> set[int]:
            rows = conn.execute("SELECT ticket, host, pid, pid_start, granted, lease_until FROM in_flight "
                                "WHERE pool = ? ORDER BY ticket", (pool,)).fetchall()
            lost = sorted(set(mine) - {r[0] for r in rows})
            if lost:  # waiting tickets dropped for a lapsed lease (this process stalled): back in their place
                conn.executemany("INSERT INTO in_flight VALUES (?, ?, ?, ?, ?, 0, ?)",
                                 [(t, pool, me.host, me.pid, me.start, now + WAIT_LEASE_S) for t in lost])
                rows = sorted(rows + [(t, me.host, me.pid, me.start, 0, now + WAIT_LEASE_S) for t in lost])
            dead = [t for t, host, pid, start, _, lease in rows if t not in mine
                    and (lease < now or (host == me.host and pid != me.pid and not alive(pid, start)))]
            if dead:
                conn.executemany("DELETE FROM in_flight WHERE ticket = ?", [(t,) for t in dead])
            live = [r for r in rows if r[0] not in set(dead)]
            free = limit - sum(1 for r in live if r[4])
            grant = [r[0] for r in live if not r[4]][:max(0, free)]
            if grant:
                conn.executemany("UPDATE in_flight SET granted = 1, lease_until = ? WHERE ticket = ?",
                                 [(now + lease_s, t) for t in grant])
            waiting = set(mine) - set(grant)
            if waiting:
                conn.executemany("UPDATE in_flight SET lease_until = ? WHERE ticket = ? AND granted = 0",
                                 [(now + WAIT_LEASE_S, t) for t in waiting])
            granted = {r[0] for r in live if r[4]} | set(grant)
            return set(mine) & granted
        return self._tx(work)

    def release(self, tickets: list[int]) -> None:
        self._tx(lambda conn, now: conn.executemany("DELETE FROM in_flight WHERE ticket = ?",
                                                    [(t,) for t in tickets]))


class PostgresSlots:
    """The queue in a table of the shared profile's Postgres; "now" is the server's clock."""

    def __init__(self, dsn: str, table: str = POSTGRES_TABLE):
        self.dsn, self.table = dsn, table
        self._local = threading.local()

    def _conn(self):
        from envduels_dagster.core.models.limits import thread_postgres

        return thread_postgres(self._local, self.dsn, self.table, "ticket BIGSERIAL PRIMARY KEY, pool TEXT NOT NULL, "
                               "host TEXT NOT NULL, pid INTEGER NOT NULL, pid_start TEXT NOT NULL, granted BOOLEAN NOT "
                               "NULL, lease_until DOUBLE PRECISION NOT NULL")

    def _tx(self, pool: str, work):
        conn = self._conn()
        try:
            with conn.cursor() as cur:
                # one poller of the pool at a time, on every machine: two never grant the same slot
                cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s)), extract(epoch FROM clock_timestamp())",
                            (f"{self.table}:{pool}",))
                now = float(cur.fetchone()[1])
                result = work(cur, now)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        return result

    def enqueue(self, pool: str) -> int:
        me = holder()

        def work(cur, now):
            cur.execute(f"INSERT INTO {self.table} (pool, host, pid, pid_start, granted, lease_until) "
                        "VALUES (%s, %s, %s, %s, false, %s) RETURNING ticket",
                        (pool, me.host, me.pid, me.start, now + WAIT_LEASE_S))
            return int(cur.fetchone()[0])
        return self._tx(pool, work)

    def poll(self, pool: str, limit: int, mine: list[int], lease_s: float) -> set[int]:
        me = holder()

        def work(cur, now):
            cur.execute(f"SELECT ticket, host, pid, pid_start, granted, lease_until FROM {self.table} "
                        "WHERE pool = %s ORDER BY ticket", (pool,))
            rows = cur.fetchall()
            lost = sorted(set(mine) - {r[0] for r in rows})
            if lost:  # waiting tickets dropped for a lapsed lease (this process stalled): back in their place
                for t in lost:
                    cur.execute(f"INSERT INTO {self.table} VALUES (%s, %s, %s, %s, %s, false, %s)",
                                (t, pool, me.host, me.pid, me.start, now + WAIT_LEASE_S))
                rows = sorted(rows + [(t, me.host, me.pid, me.start, False, now + WAIT_LEASE_S) for t in lost])
            dead = [t for t, host, pid, start, _, lease in rows if t not in mine
                    and (lease < now or (host == me.host and pid != me.pid and not alive(pid, start)))]
            if dead:
                cur.execute(f"DELETE FROM {self.table} WHERE ticket = ANY(%s)", (dead,))
            live = [r for r in rows if r[0] not in set(dead)]
            free = limit - sum(1 for r in live if r[4])
            grant = [r[0] for r in live if not r[4]][:max(0, free)]
            if grant:
                cur.execute(f"UPDATE {self.table} SET granted = true, lease_until = %s WHERE ticket = ANY(%s)",
                            (now + lease_s, grant))
            waiting = list(set(mine) - set(grant))
            if waiting:
                cur.execute(f"UPDATE {self.table} SET lease_until = %s WHERE ticket = ANY(%s) AND NOT granted",
                            (now + WAIT_LEASE_S, waiting))
            return set(mine) & ({r[0] for r in live if r[4]} | set(grant))
        return self._tx(pool, work)

    def release(self, tickets: list[int]) -> None:
        self._tx("release", lambda cur, now: cur.execute(f"DELETE FROM {self.table} WHERE ticket = ANY(%s)",
                                                          (list(tickets),)))


def slot_store_for(limiter) -> SlotStore | None:
    """The queue in the limiter's storage (same SQLite file, same Postgres); None for a limiter in memory."""
    from envduels_dagster.core.models.limits import PostgresLimiter, SqliteLimiter

    if isinstance(limiter, PostgresLimiter):
        return PostgresSlots(limiter.dsn)
    if isinstance(limiter, SqliteLimiter):
        return SqliteSlots(limiter.path)
    return None


class InFlight:
    """This process's side of the queue: one poller task per pool for all of its waiting calls."""

    def __init__(self, store: SlotStore):
        self.store = store
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: dict[str, dict[int, asyncio.Future]] = {}
        self._kick: dict[str, asyncio.Event] = {}
        self._pollers: dict[str, asyncio.Task] = {}

    async def acquire(self, pool: str, limit: int, lease_s: float) -> int:
        """Wait for a slot of ``pool`` (at most ``limit`` granted across every process); return its ticket."""
        if self._loop is not asyncio.get_running_loop():  # a gateway used by a later asyncio.run: fresh state
            self._loop, self._waiting, self._kick, self._pollers = asyncio.get_running_loop(), {}, {}, {}
        ticket = self.store.enqueue(pool)
        future = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(pool, {})[ticket] = future
        kick = self._kick.setdefault(pool, asyncio.Event())
        kick.set()
        poller = self._pollers.get(pool)
        if poller is None or poller.done():
            self._pollers[pool] = asyncio.ensure_future(self._poll(pool, limit, lease_s, kick))
        try:
            await future
        except asyncio.CancelledError:  # cancelled while waiting (or granted at the same instant): give it back
            self._waiting.get(pool, {}).pop(ticket, None)
            self.store.release([ticket])
            kick.set()
            raise
        except Exception:  # the storage failed in the poller: the ticket may be left to its lease
            try:
                self.store.release([ticket])
            except Exception:  # noqa: BLE001 - the original error is the one to report
                pass
            raise
        return ticket

    def release(self, pool: str, ticket: int) -> None:
        """The attempt ended: free the slot and let this process's next waiting call take it at once."""
        self.store.release([ticket])
        if pool in self._kick:
            self._kick[pool].set()

    async def _poll(self, pool: str, limit: int, lease_s: float, kick: asyncio.Event) -> None:
        waiting = self._waiting[pool]
        while waiting:
            kick.clear()
            try:
                granted = self.store.poll(pool, limit, list(waiting), lease_s)
            except Exception as exc:  # the storage failed: every waiting call fails with its error, none hangs
                for future in waiting.values():
                    if not future.done():
                        future.set_exception(exc)
                waiting.clear()
                return
            for ticket in granted:
                future = waiting.pop(ticket, None)
                if future is not None and not future.done():
                    future.set_result(None)
            if not waiting:
                break
            try:
                await asyncio.wait_for(kick.wait(), POLL_S)
            except TimeoutError:
                pass

    async def aclose(self) -> None:
        for task in self._pollers.values():
            task.cancel()
        self._pollers = {}
