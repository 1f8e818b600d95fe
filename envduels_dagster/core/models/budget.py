"""The spending cap: a ledger every paid model call consults *before* it is made.

Why a ledger and not a sum of the warehouse: the warehouse learns of a pair's calls only when the
pair is written, after every call was paid, and several runs play at once. The ledger is a small
SQLite file beside the call cache (WAL, ``BEGIN IMMEDIATE``): a call first *reserves* its worst
case (the prompt it sends plus ``max_tokens`` of reply, at the registry's price), and is refused
when that reservation would take the model past its ``budget_usd`` or everything past
``ENVDUELS_BUDGET_USD``; after the call the reservation is *settled* at what it cost. Reservations
of every process count, so the cap holds however many runs play at once. A reservation records its
owner (host, pid and the process's start time): one whose owner is gone (killed, crashed) stops counting
at once, the next time any process reserves or opens the ledger, instead of blocking a re-run until it
expires after ``hold_s`` (issue 44: a killed run's 8 holds stopped its re-run $0.59 under the cap). Spending is durable: it accumulates across runs until the
file is deleted, and a cache hit costs nothing and never consults the ledger, so raising the cap
and re-running pays only for calls not made yet.

A refused call raises :class:`BudgetExhausted` (an ``LLMError`` of class ``stopped_at_budget``):
the episode it belonged to ends ``incomplete`` with that stop reason, never a solver failure.
"""

from __future__ import annotations

import math
import os
import socket
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from envduels_dagster.core.models import state_files
from envduels_dagster.core.models.registry import ModelEntry, Registry
from envduels_dagster.core.models.state_files import state_file
from envduels_dagster.core.models.types import LLMError

BUDGET_ENV = "ENVDUELS_BUDGET_USD"
STOPPED_AT_BUDGET = "stopped_at_budget"


class BudgetError(ValueError):
    """A budget setting that cannot be used (bad value, or a cap on a model without a price)."""


class BudgetExhausted(LLMError):
    """The next call would pass a cap: it was not made."""

    def __init__(self, message: str):
        super().__init__(STOPPED_AT_BUDGET, message)


def parse_budget(text: str | None, where: str = BUDGET_ENV) -> float | None:
    """A cap in US dollars from text: None when unset or blank; BudgetError naming ``where`` otherwise."""
    if text is None or not text.strip():
        return None
    try:
        value = float(text.strip())
    except ValueError:
        raise BudgetError(f"{where}={text!r} is not a number: give a positive amount in US dollars "
                          f"(e.g. {where}=25 or {where}=2.50), or unset it for no overall cap") from None
    if not math.isfinite(value) or value <= 0:
        raise BudgetError(f"{where}={text!r} cannot be used: a budget must be a positive, finite amount in "
                          "US dollars (unset it for no overall cap)")
    return value


def priced(entry: ModelEntry) -> bool:
    return entry.input_cost_per_mtok > 0 or entry.output_cost_per_mtok > 0


@dataclass(frozen=True)
class Caps:
    """Per-model caps (registry ``budget_usd``) and the overall one (``ENVDUELS_BUDGET_USD``)."""

    per_model: dict[str, float] = field(default_factory=dict)
    total: float | None = None

    @property
    def active(self) -> bool:
        return bool(self.per_model) or self.total is not None


def caps_for(registry: Registry, total: float | None) -> Caps:
    """The caps of ``registry`` and ``total``; BudgetError when a capped model has no price to enforce it with.

    A model nobody priced spends an unknown amount: under a cap it is refused here, before anything
    runs, instead of being treated as free. Unpriced simulated models are free and need no price."""
    per_model = {m.name: float(m.budget_usd) for m in registry.models if m.budget_usd is not None}
    unenforceable = [m.name for m in registry.models if not priced(m) and not m.is_simulated
                     and (m.name in per_model or total is not None)]
    if unenforceable:
        which = "its budget_usd" if total is None else f"{BUDGET_ENV}" + (" and budget_usd" if per_model else "")
        raise BudgetError(f"{registry.path}: model(s) {', '.join(unenforceable)} have no price, so {which} cannot be "
                          "enforced: set input_cost_per_mtok and output_cost_per_mtok for them (or remove the cap)")
    return Caps(per_model, total)


def estimate_prompt_tokens(messages: list[dict[str, str]]) -> int:
    """A generous count of the tokens a prompt holds (3 characters a token; English and code average ~4)."""
    return sum(len(m.get("content") or "") for m in messages) // 3 + 4 * len(messages) + 8


@dataclass(frozen=True)
class Reservation:
    id: int
    model: str


SCHEMA = ("CREATE TABLE IF NOT EXISTS spend (id INTEGER PRIMARY KEY AUTOINCREMENT, model TEXT NOT NULL, "
          "state TEXT NOT NULL, usd REAL NOT NULL, prompt_tokens INTEGER NOT NULL DEFAULT 0, "
          "completion_tokens INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL, expires REAL, owner TEXT)")


def _start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot, /proc/<pid>/stat field 22); None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def owner_of_this_process() -> str:
    """``host:pid:start``: the pid alone could be reused by a new process after the owner died."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_time(os.getpid()) or '?'}"


def owner_alive(owner: str | None) -> bool:
    """Whether the process that made a reservation still runs (True when it cannot be told: another host,
    or no /proc; such holds keep counting until they expire)."""
    if not owner:
        return True
    host, _, rest = owner.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit() or start == "?" or not os.path.isdir("/proc/self"):
        return True
    return _start_time(int(pid_text)) == start


class BudgetLedger:
    """The durable spending record (see the module docstring). ``hold_s``: how long a reservation of a
    process that never settled it (it died) keeps counting; at least the longest call with its retries."""

    def __init__(self, path: str | Path, caps: Caps, hold_s: float = 3600.0):
        self.path, self.caps, self.hold_s = Path(path), caps, hold_s
        self._owner = (os.getpid(), owner_of_this_process())
        self._local = threading.local()
        with state_file(self.path):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = self._conn()
            conn.execute(SCHEMA)
            if "owner" not in {row[1] for row in conn.execute("PRAGMA table_info(spend)")}:  # a ledger of before
                conn.execute("ALTER TABLE spend ADD COLUMN owner TEXT")
            self.release_dead()

    @property
    def owner(self) -> str:
        """This process's owner string (computed again in a forked child: its holds are its own)."""
        if self._owner[0] != os.getpid():
            self._owner = (os.getpid(), owner_of_this_process())
        return self._owner[1]

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            with state_file(self.path):
                conn = sqlite3.connect(self.path, timeout=state_files.BUSY_TIMEOUT_S, isolation_level=None)
                conn.execute("PRAGMA journal_mode=WAL")
            self._local.conn = conn
        return conn

    def _dead_owners(self, conn: sqlite3.Connection) -> list[str]:
        owners = conn.execute("SELECT DISTINCT owner FROM spend WHERE state = 'reserved' AND owner IS NOT NULL")
        return [o for (o,) in owners.fetchall() if not owner_alive(o)]

    def release_dead(self) -> int:
        """Drop the reservations of processes that are gone; how many were dropped."""
        with state_file(self.path):
            conn = self._conn()
            dead = self._dead_owners(conn)
            if not dead:
                return 0
            marks = ",".join("?" * len(dead))
            return conn.execute(f"DELETE FROM spend WHERE state = 'reserved' AND owner IN ({marks})", dead).rowcount

    def left(self) -> str:
        """What each cap has left (spent and held counted), for the messages of a stop at the cap."""
        with state_file(self.path):
            conn, now, parts = self._conn(), time.time(), []
            if self.caps.total is not None:
                parts.append(f"${max(0.0, self.caps.total - self._committed(conn, None, now)):.4f} of the overall "
                             f"{BUDGET_ENV}=${self.caps.total:g}")
            for model, cap in sorted(self.caps.per_model.items()):
                parts.append(f"${max(0.0, cap - self._committed(conn, model, now)):.4f} of {model}'s "
                             f"budget_usd=${cap:g}")
        return "left: " + ", ".join(parts) if parts else "no cap is set"

    def applies_to(self, entry: ModelEntry) -> bool:
        """Whether calls of ``entry`` are counted: a cap is set and the model has a price."""
        return self.caps.active and priced(entry)

    def _committed(self, conn: sqlite3.Connection, model: str | None, now: float) -> float:
        where, args = ("AND model = ?", [model]) if model is not None else ("", [])
        (usd,) = conn.execute(f"SELECT COALESCE(SUM(usd), 0) FROM spend WHERE (state = 'spent' OR expires > ?) {where}",
                              [now, *args]).fetchone()
        return float(usd)

    def reserve(self, entry: ModelEntry, messages: list[dict[str, str]]) -> Reservation:
        """Hold the call's worst case, or raise BudgetExhausted when it would pass a cap (nothing held then)."""
        worst = entry.cost(estimate_prompt_tokens(messages), entry.max_tokens)
        with state_file(self.path):
            return self._reserve(entry, worst)

    def _reserve(self, entry: ModelEntry, worst: float) -> Reservation:
        conn, now = self._conn(), time.time()
        conn.execute("BEGIN IMMEDIATE")  # one writer at a time across processes: check and hold together
        try:
            dead = self._dead_owners(conn)
            if dead:  # a killed run's holds: gone at once, not after hold_s
                conn.execute(f"DELETE FROM spend WHERE state = 'reserved' AND owner IN ({','.join('?' * len(dead))})",
                             dead)
            checks = [(self.caps.per_model.get(entry.name), entry.name, f"model {entry.name!r}'s budget_usd")]
            checks.append((self.caps.total, None, f"the overall {BUDGET_ENV}"))
            for cap, model, label in checks:
                if cap is None:
                    continue
                committed = self._committed(conn, model, now)
                if committed + worst > cap:
                    raise BudgetExhausted(
                        f"{label} of ${cap:g} would be passed: ${committed:.4f} spent or held, "
                        f"${max(0.0, cap - committed):.4f} left, the next call of {entry.name!r} may cost up to "
                        f"${worst:.4f}; raise {'ENVDUELS_BUDGET_USD' if model is None else 'its budget_usd'} and "
                        "re-run (calls already made come from the call cache)")
            cur = conn.execute("INSERT INTO spend (model, state, usd, created, expires, owner) "
                               "VALUES (?, 'reserved', ?, ?, ?, ?)", [entry.name, worst, now, now + self.hold_s, self.owner])
            rid = int(cur.lastrowid or 0)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return Reservation(rid, entry.name)

    def settle(self, reservation: Reservation, usd: float, prompt_tokens: int, completion_tokens: int) -> None:
        """Turn the reservation into what the call cost."""
        with state_file(self.path):
            self._conn().execute("UPDATE spend SET state = 'spent', usd = ?, prompt_tokens = ?, completion_tokens = ?, "
                             "expires = NULL WHERE id = ?",
                                 [float(usd), int(prompt_tokens), int(completion_tokens), reservation.id])

    def release(self, reservation: Reservation) -> None:
        """The call failed before a reply: providers do not charge for it, the hold goes."""
        with state_file(self.path):
            self._conn().execute("DELETE FROM spend WHERE id = ? AND state = 'reserved'", [reservation.id])

    def spent(self) -> dict[str, dict[str, float]]:
        """Per model: settled calls, tokens and dollars (reservations not included)."""
        with state_file(self.path):
            rows = self._conn().execute("SELECT model, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(usd) "
                                        "FROM spend WHERE state = 'spent' GROUP BY model ORDER BY model").fetchall()
        return {m: {"calls": n, "prompt_tokens": p, "completion_tokens": c, "usd": u} for m, n, p, c, u in rows}

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def open_ledger(registry: Registry, total: float | None, cache_location: str, home: Path | None,
                hold_s: float = 3600.0) -> BudgetLedger | None:
    """The ledger every entry point that calls models uses (the runs, ``play``, the pilot): None when no cap is
    set; BudgetError before any call when a capped model's price cannot be used. ``total``: the overall cap
    (``ENVDUELS_BUDGET_USD``, parsed by :func:`parse_budget` in settings/variables.py), None for none."""
    caps = caps_for(registry, total)
    if not caps.active:
        return None
    return BudgetLedger(ledger_path_for(cache_location, home), caps, hold_s)


def ledger_path_for(cache_location: str, home: Path | None = None) -> Path:
    """The ledger beside a SQLite call cache (``budget.sqlite``); for a Postgres cache, under ``home``/cache."""
    if "://" in cache_location:
        if home is None:
            raise BudgetError("a Postgres call cache needs ENVDUELS_HOME for the budget ledger")
        return home / "cache" / "budget.sqlite"
    return Path(cache_location).with_name("budget.sqlite")
