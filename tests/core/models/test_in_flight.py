"""A provider's max_in_flight held across every run and process (core/models/in_flight.py): real run
processes against a real `envduels serve-sim` that counts (and refuses) calls past the limit, dead holders'
slots, leases, cancelled waits, the Postgres store."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from envduels_dagster.core.models import Gateway, MemoryLimiter, RetryPolicy
from envduels_dagster.core.models.in_flight import InFlight, PostgresSlots, SqliteSlots, process_start, slot_store_for
from envduels_dagster.core.models.limits import SqliteLimiter
from envduels_dagster.core.models.registry import load_registry
from tests.helpers.paths import REPO
from tests.helpers.sim_server import SimServerProcess, health

LIMIT, CALLS, LATENCY_S = 4, 16, 0.25


def write_registry(tmp_path, base: str) -> str:
    path = tmp_path / "models.yaml"
    path.write_text(f"models:\n  - name: remote\n    model: openai/novice\n    api_base: {base}\n    client: fast\n"
                    f"    max_in_flight: {LIMIT}\n")
    return str(path)


@pytest.mark.slow
def test_three_run_processes_never_exceed_max_in_flight_and_keep_it_full(tmp_path):
    # the server refuses (429) any call past the account's limit; each run process alone would put LIMIT in flight
    srv = SimServerProcess("--latency-ms", str(LATENCY_S * 1000), "--max-in-flight", str(LIMIT))
    procs = []
    try:
        registry, cache = write_registry(tmp_path, srv.base), str(tmp_path / "home" / "cache" / "calls.sqlite")
        for i in range(3):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "tests.helpers.in_flight_run", registry, cache, str(CALLS), str(100 * i)],
                cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        before, t0 = health(srv), time.time()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
        after = health(srv)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        srv.stop()
    assert [r["errors"] for r in results] == [[], [], []]  # no 429: never past the limit ...
    assert after["over_in_flight"] == 0 and after["max_in_flight"] == LIMIT  # ... and the limit reached
    assert sum(r["calls"] for r in results) == after["completions"] - before["completions"] == 3 * CALLS
    # kept full: the mean calls in flight from "go" to the last reply, against the limit (the ideal wall is
    # 48 calls x 0.25 s / 4 = 3 s; a poll interval lost per hand-over between processes, and a loaded machine)
    wall = max(r["done_at"] for r in results) - t0
    mean = (after["in_flight_s"] - before["in_flight_s"]) / wall
    assert mean >= 0.75 * LIMIT, (mean, wall)
    assert not (tmp_path / "home" / "cache" / "provider_limits.sqlite").stat().st_size == 0
    rows = sqlite3.connect(tmp_path / "home" / "cache" / "provider_limits.sqlite").execute(
        "SELECT count(*) FROM in_flight").fetchone()[0]
    assert rows == 0  # every ticket given back


HOLD = """
import sys, time
from envduels_dagster.core.models.in_flight import SqliteSlots
store = SqliteSlots(sys.argv[1])
mine = [store.enqueue("acct") for _ in range(2)]
print(sorted(store.poll("acct", 2, mine, 600.0)) == sorted(mine), flush=True)
time.sleep(600)
"""


def test_a_dead_holders_slots_are_freed_at_once(tmp_path):
    path = tmp_path / "provider_limits.sqlite"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "True"  # it holds both slots, for a lease of 10 minutes
        store = SqliteSlots(path)
        ticket = store.enqueue("acct")
        assert store.poll("acct", 2, [ticket], 60.0) == set()  # the limit is full while its holder lives
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        assert store.poll("acct", 2, [ticket], 60.0) == {ticket}  # gone: its slots are reaped, not leased out
        left = sqlite3.connect(path).execute("SELECT ticket FROM in_flight").fetchall()
        assert left == [(ticket,)]
    finally:
        if holder.poll() is None:
            holder.kill()


def test_a_ticket_past_its_lease_is_freed_and_the_queue_is_first_come_first_served(tmp_path):
    a, b = SqliteSlots(tmp_path / "l.sqlite"), SqliteSlots(tmp_path / "l.sqlite")
    first = a.enqueue("acct")
    assert a.poll("acct", 1, [first], 0.3) == {first}  # a lease of 0.3 s (a holder on another machine)
    second, third = b.enqueue("acct"), a.enqueue("acct")
    assert a.poll("acct", 1, [third], 60.0) == set()  # full, and the older ticket comes first anyway
    time.sleep(0.5)
    assert a.poll("acct", 1, [third], 60.0) == set()  # the lease ended: the slot went to b's older ticket ...
    assert b.poll("acct", 1, [second], 60.0) == {second}  # ... which b finds granted at its next poll
    b.release([second])
    assert a.poll("acct", 1, [third], 60.0) == {third}
    assert a.poll("other", 1, [], 60.0) == set() and process_start(os.getpid()) != ""


def test_a_cancelled_wait_gives_its_ticket_back_and_the_next_call_goes(tmp_path):
    store = SqliteSlots(tmp_path / "l.sqlite")

    async def main():
        slots = InFlight(store)
        held = await slots.acquire("acct", 1, 60.0)
        waiter = asyncio.ensure_future(slots.acquire("acct", 1, 60.0))
        await asyncio.sleep(0.05)
        assert not waiter.done()  # the limit is 1 and held
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        after_cancel = sqlite3.connect(store.path).execute("SELECT count(*) FROM in_flight").fetchone()[0]
        nxt = asyncio.ensure_future(slots.acquire("acct", 1, 60.0))
        slots.release("acct", held)
        got = await asyncio.wait_for(nxt, 5)  # woken by the release in this process, not a poll later
        slots.release("acct", got)
        await slots.aclose()
        return after_cancel

    assert asyncio.run(main()) == 1  # only the held ticket: the cancelled one was deleted
    assert sqlite3.connect(store.path).execute("SELECT count(*) FROM in_flight").fetchone()[0] == 0


@pytest.mark.slow  # the in-process model's first call imports the simulated models (~5 s under load)
def test_which_gateways_share_the_limit(tmp_path):
    assert isinstance(slot_store_for(SqliteLimiter(tmp_path / "l.sqlite")), SqliteSlots)
    assert slot_store_for(MemoryLimiter()) is None  # no shared storage: the run's semaphore holds it
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - name: m\n    model: envduels-sim/novice\n    max_in_flight: 2\n")
    gateway = Gateway(load_registry(path), policy=RetryPolicy(), limiter=SqliteLimiter(tmp_path / "l.sqlite"))
    asyncio.run(gateway.chat("m", [{"role": "user", "content": "hi"}], seed=0))
    assert not (tmp_path / "l.sqlite").exists()  # an in-process model has no account to share: no table touched


def test_an_unusable_store_fails_the_call_naming_the_file(tmp_path):
    (tmp_path / "cache").write_text("not a directory")
    store = SqliteSlots(tmp_path / "cache" / "provider_limits.sqlite")
    with pytest.raises(RuntimeError, match=r"cache/provider_limits\.sqlite") as exc:
        asyncio.run(InFlight(store).acquire("acct", 1, 60.0))
    assert "max_in_flight" in str(exc.value)
    assert (tmp_path / "cache").read_text() == "not a directory"  # nothing written over it


@pytest.mark.slow  # starts a Postgres cluster
def test_postgres_slots_are_one_queue_for_every_connection():
    from tests.helpers.postgres import LocalPostgres, PostgresUnavailable

    try:
        pg = LocalPostgres().start()
    except PostgresUnavailable as exc:
        pytest.skip(str(exc))
    try:
        a, b = PostgresSlots(pg.url("postgres")), PostgresSlots(pg.url("postgres"))
        first, second = a.enqueue("acct"), b.enqueue("acct")
        assert a.poll("acct", 1, [first], 60.0) == {first}
        assert b.poll("acct", 1, [second], 60.0) == set()  # one slot for both connections
        a.release([first])
        assert b.poll("acct", 1, [second], 60.0) == {second}
        # a holder that died on this host: reaped by pid and start time
        with b._conn().cursor() as cur:
            cur.execute("UPDATE envduels_in_flight SET pid = 999999999, pid_start = 'x' WHERE ticket = %s", (second,))
        b._conn().commit()
        third = a.enqueue("acct")
        assert a.poll("acct", 1, [third], 60.0) == {third}
    finally:
        pg.stop()


def test_a_stalled_waiters_lapsed_ticket_goes_back_in_its_place(tmp_path, monkeypatch):
    from envduels_dagster.core.models import in_flight

    a, b = SqliteSlots(tmp_path / "l.sqlite"), SqliteSlots(tmp_path / "l.sqlite")
    held = b.enqueue("acct")
    assert b.poll("acct", 1, [held], 60.0) == {held}
    monkeypatch.setattr(in_flight, "WAIT_LEASE_S", 0.2)
    mine = a.enqueue("acct")
    time.sleep(0.4)  # a's process stalled past its waiting lease: another process's poll drops the ticket
    newer = b.enqueue("acct")
    assert b.poll("acct", 1, [newer], 60.0) == set()
    assert sqlite3.connect(a.path).execute("SELECT ticket FROM in_flight ORDER BY ticket").fetchall() == [
        (held,), (newer,)]
    monkeypatch.setattr(in_flight, "WAIT_LEASE_S", 30.0)
    assert a.poll("acct", 1, [mine], 60.0) == set()  # a's next poll puts it back, ahead of the newer ticket
    b.release([held])
    assert a.poll("acct", 1, [mine], 60.0) == {mine} and b.poll("acct", 1, [newer], 60.0) == set()
