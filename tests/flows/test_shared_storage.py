"""The shared storage profile against a real Postgres server: DuckLake warehouse and call cache.

Why real processes and a real server: what must hold -- nothing lost while several writers race,
readers never seeing half a partition, conflicts retried -- only shows with concurrent processes
against Postgres and Parquet files. The server is Debian's (tests/helpers/postgres.py); these
tests skip, saying so, only where it cannot be installed.
"""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest

from tests.helpers.postgres import pg  # noqa: F401 - pg is a fixture (a Postgres server for the module)

pytestmark = pytest.mark.slow


def _frame(author: str, solver: str, version: int, rows: int = 12):
    import datetime as dt

    import pandas as pd

    from envduels_dagster.core.storage.warehouse import _columns

    recs = [{"env_id": f"{author}.e{i % 3}", "author": author, "solver": solver, "round": 0,
             "condition": "cold" if i % 2 else "hinted", "seed": 2**63 + i // 2, "status": "failure", "turns": 1,
             "transcript": "t" * 200, "solver_version": str(version), "is_self_pair": author == solver,
             "materialized_at": dt.datetime(2026, 1, 1)} for i in range(rows)]
    return pd.DataFrame(recs, columns=[c.split()[0] for c in _columns("episodes")])


def _writer(location: str, data_path: str, author: str, versions: int, out, start) -> None:
    from envduels_dagster.core.storage import location as storage
    from envduels_dagster.core.storage.location import Warehouse
    from envduels_dagster.core.storage.warehouse import replace_rows

    wh = Warehouse(location, data_path)
    wh.connect().close()  # extensions loaded, catalog attached: then all writers start at once
    start.wait(timeout=120)  # (under load, writers that start seconds apart might never overlap)
    for version in range(versions):
        for solver in ("s0", "s1"):
            with wh.connect() as conn:
                replace_rows(conn, "episodes", _frame(author, solver, version), {"author": author, "solver": solver})
    out.put(("writer", author, storage.STATS.conflicts))


def _reader(location: str, data_path: str, stop, out) -> None:
    from envduels_dagster.core.storage.location import Warehouse
    from envduels_dagster.core.storage.warehouse import ensure_schema

    wh = Warehouse(location, data_path)
    with wh.connect() as conn:
        ensure_schema(conn)  # as read_table does: the reader may come before any writer
    reads, partial = 0, []
    while not stop.is_set():
        with wh.connect() as conn:
            counts = conn.execute("SELECT author, solver, count(*), count(DISTINCT solver_version) FROM episodes "
                                  "GROUP BY ALL").fetchall()
        reads += 1
        partial += [c for c in counts if c[2] != 12 or c[3] != 1]  # half a partition, or two versions mixed
        time.sleep(0.02)
    out.put(("reader", reads, partial))


def test_concurrent_writer_processes_lose_nothing_retry_conflicts_and_a_reader_never_sees_half_a_pair(pg, tmp_path):
    from envduels_dagster.core.storage.location import Warehouse
    from envduels_dagster.core.storage.warehouse import ensure_schema, read_table, replace_rows

    location, data_path = "ducklake:postgres:" + pg.create_database("lake_race"), f"{tmp_path}/lake/"
    ctx = mp.get_context("spawn")
    out, stop, start = ctx.Queue(), ctx.Event(), ctx.Barrier(3)
    writers = [ctx.Process(target=_writer, args=(location, data_path, f"a{w}", 4, out, start)) for w in range(3)]
    reader = ctx.Process(target=_reader, args=(location, data_path, stop, out))
    for p in [*writers, reader]:  # the writers race to create the tables, too
        p.start()
    results = [out.get(timeout=180) for _ in writers]
    stop.set()
    reads = out.get(timeout=60)
    for p in [*writers, reader]:
        p.join(timeout=60)
        assert p.exitcode == 0

    assert sum(r[2] for r in results) > 0, "three writers on one table should have raced at least once"
    assert reads[1] > 0 and reads[2] == [], f"the reader saw partial pairs: {reads[2][:5]}"
    shared = read_table(Warehouse(location, data_path).connect(), "episodes")
    assert len(shared) == 3 * 2 * 12 and set(shared.solver_version) == {"3"}  # every pair's last version, whole

    # The same writes on the embedded default give the same table.
    embedded = Warehouse(str(tmp_path / "warehouse.duckdb"))
    with embedded.connect() as conn:
        ensure_schema(conn)
        for author in ("a0", "a1", "a2"):
            for solver in ("s0", "s1"):
                replace_rows(conn, "episodes", _frame(author, solver, 3), {"author": author, "solver": solver})
        local = read_table(conn, "episodes")
    key = ["author", "solver", "env_id", "condition", "seed"]
    a = shared.sort_values(key).reset_index(drop=True)
    b = local.sort_values(key).reset_index(drop=True)
    assert a.drop(columns=["benchmark_seeds"], errors="ignore").equals(b.drop(columns=["benchmark_seeds"],
                                                                              errors="ignore"))
    assert a.seed.max() >= 2**63  # UBIGINT seeds survive Parquet


def test_a_conflict_is_retried_whole_and_a_real_error_is_not(monkeypatch):
    import duckdb

    from envduels_dagster.core.storage import location as storage

    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise duckdb.TransactionException("Failed to commit DuckLake transaction.\nTransaction conflict - ...")
        return "done"

    monkeypatch.setattr(storage.time, "sleep", lambda s: None)
    assert storage.retry_conflicts(flaky) == "done" and len(calls) == 3

    def broken():
        raise duckdb.CatalogException("Table with name nope does not exist!")

    with pytest.raises(duckdb.CatalogException):
        storage.retry_conflicts(broken)


def _cache_writer(url: str, worker: int, out) -> None:
    from envduels_dagster.core.models.call_cache import open_call_cache

    cache = open_call_cache(url)
    for i in range(50):
        cache.put(f"shared-{i}", "m", {"n": i})  # every worker writes the same keys...
        cache.put(f"own-{worker}-{i}", "m", {"w": worker})  # ...and its own
    out.put(len(cache))


def test_the_postgres_call_cache_is_shared_by_processes_and_agrees_on_duplicate_calls(pg):
    from envduels_dagster.core.models.call_cache import open_call_cache
    from envduels_dagster.core.models.pg_call_cache import PostgresCallCache

    url = pg.create_database("calls")
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_cache_writer, args=(url, w, out)) for w in range(3)]
    for p in procs:
        p.start()
    [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    cache = open_call_cache(url)
    assert isinstance(cache, PostgresCallCache)
    assert len(cache) == 50 + 3 * 50
    assert cache.get("shared-7") == {"n": 7} and cache.get("own-2-49") == {"w": 2} and cache.get("nope") is None
