"""Benchmark: concurrent pair writers on the three warehouse candidates of the shared profile.

    .venv/bin/python benchmarks/storage.py [--writers 3] [--commits 20] [--rows 24] [--json]

Why: docs/DECISIONS.md chooses the shared warehouse from these figures. Each writer is its own
process (as Dagster runs are) and replaces one pair's rows of ``episodes`` per commit, the way
``duel_episodes`` does (delete the pair's rows + insert, one transaction); a reader process counts
rows meanwhile and checks that every pair holds 0 or exactly ``rows`` rows (nothing half-written).

* ``embedded`` -- the DuckDB file: one writer at a time, so a writer retries opening the file;
* ``ducklake`` -- DuckLake, catalog in Postgres, Parquet data (``core/storage/location.py``), conflicts retried;
* ``postgres`` -- a plain Postgres table (psycopg2; the dbt-postgres option).

A local Postgres server (tests/helpers/postgres.py, fsync on) serves the last two.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402


def frame(author: str, solver: str, rows: int, commit: int) -> pd.DataFrame:
    from envduels_dagster.core.storage.warehouse import _columns

    now = dt.datetime.now()
    recs = [{"env_id": f"{author}-e{i % 3}", "author": author, "solver": solver, "round": 0,
             "condition": "cold" if i % 2 else "hinted", "seed": i // 6, "status": "failure", "stop_reason": "done",
             "turns": 3, "max_turns": 8, "format_errors": 0, "final_reward": 0.0, "prompt_tokens": 300,
             "completion_tokens": 40, "cost_usd": 0.0, "latency_s": 0.01, "model_calls": 3, "cached_calls": 0,
             "retries": 0, "retry_errors": "", "error": None, "transcript": "x" * 1500, "is_self_pair": False,
             "solver_version": str(commit), "materialized_at": now} for i in range(rows)]
    return pd.DataFrame(recs, columns=[c.split()[0] for c in _columns("episodes")])


def _open(kind: str, target: str, data_path: str):
    from envduels_dagster.core.storage.location import Warehouse

    if kind == "embedded":
        import duckdb

        deadline = time.monotonic() + 120
        while True:  # the file admits one process at a time: wait for it, as the assets' resource does
            try:
                return duckdb.connect(target)
            except duckdb.IOException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.005)
    return Warehouse(target, data_path).connect()


def writer(kind: str, target: str, data_path: str, w: int, commits: int, rows: int, out) -> None:
    from envduels_dagster.core.storage import location as storage
    from envduels_dagster.core.storage.warehouse import replace_rows

    messages: list[str] = []
    retry = storage.retry_conflicts
    storage.retry_conflicts = lambda work, **kw: retry(work, on_conflict=lambda _a, e: messages.append(str(e)[:160]), **kw)
    import envduels_dagster.core.storage.warehouse as warehouse_module

    warehouse_module.retry_conflicts = storage.retry_conflicts
    start = time.perf_counter()
    for c in range(commits):
        df = frame(f"a{w}", f"s{c % 5}", rows, c)
        if kind == "postgres":
            _pg_replace(target, df)
            continue
        conn = _open(kind, target, data_path)  # per commit: a pair run opens, writes, closes
        try:
            replace_rows(conn, "episodes", df, {"author": f"a{w}", "solver": f"s{c % 5}"})
        finally:
            conn.close()
    out.put({"writer": w, "seconds": time.perf_counter() - start, "conflicts": storage.STATS.conflicts,
             "messages": sorted(set(messages))[:3]})


def _pg_replace(url: str, df: pd.DataFrame) -> None:
    import psycopg2
    from psycopg2.extras import execute_values

    conn = psycopg2.connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute("DELETE FROM episodes WHERE author = %s AND solver = %s",
                        (df.author.iloc[0], df.solver.iloc[0]))
            cols = list(df.columns)
            execute_values(cur, f"INSERT INTO episodes ({', '.join(cols)}) VALUES %s",
                           [tuple(r) for r in df.itertuples(index=False)])
        conn.commit()
    finally:
        conn.close()


def reader(kind: str, target: str, data_path: str, rows: int, stop, out) -> None:
    reads, bad, failed = 0, 0, 0
    while not stop.is_set():
        try:
            if kind == "postgres":
                import psycopg2

                with psycopg2.connect(target) as conn, conn.cursor() as cur:
                    cur.execute("SELECT author, solver, count(*) FROM episodes GROUP BY 1, 2")
                    counts = cur.fetchall()
            else:
                if kind == "embedded":
                    import duckdb

                    conn = duckdb.connect(target, read_only=True)
                else:
                    conn = _open(kind, target, data_path)
                counts = conn.execute("SELECT author, solver, count(*) FROM episodes GROUP BY 1, 2").fetchall()
                conn.close()
            reads += 1
            bad += sum(1 for *_k, n in counts if n != rows)
        except Exception:  # noqa: BLE001 -- the embedded file refuses readers while a writer holds it
            failed += 1
            time.sleep(0.01)
    out.put({"reads": reads, "half_written": bad, "refused": failed})


def prepare(kind: str, target: str, data_path: str) -> None:
    from envduels_dagster.core.storage.warehouse import SCHEMA, ensure_schema

    if kind == "postgres":
        import psycopg2

        cols = SCHEMA["episodes"].replace("UBIGINT", "NUMERIC(20)").replace("DOUBLE", "DOUBLE PRECISION") \
            .replace("VARCHAR", "TEXT")
        with psycopg2.connect(target) as conn, conn.cursor() as cur:
            cur.execute(f"CREATE TABLE episodes ({cols})")
            cur.execute("CREATE INDEX ON episodes (author, solver)")
        return
    conn = _open(kind, target, data_path)
    ensure_schema(conn)
    conn.close()


def run(kind: str, target: str, data_path: str, writers: int, commits: int, rows: int) -> dict:
    ctx = mp.get_context("spawn")
    prepare(kind, target, data_path)
    out, stop = ctx.Queue(), ctx.Event()
    rd = ctx.Process(target=reader, args=(kind, target, data_path, rows, stop, out))
    rd.start()
    start = time.perf_counter()
    procs = [ctx.Process(target=writer, args=(kind, target, data_path, w, commits, rows, out)) for w in range(writers)]
    for p in procs:
        p.start()
    results = [out.get(timeout=600) for _ in procs]
    wall = time.perf_counter() - start
    stop.set()
    read = out.get(timeout=60)
    for p in [*procs, rd]:
        p.join()
    total = writers * commits
    return {"store": kind, "writers": writers, "commits": total, "rows_per_commit": rows, "wall_s": round(wall, 2),
            "commits_per_s": round(total / wall, 1), "rows_per_s": round(total * rows / wall),
            "writer_loop_s": round(max(r["seconds"] for r in results), 2),
            "conflict_retries": sum(r["conflicts"] for r in results), **read,
            "conflicts_seen": sorted({m for r in results for m in r["messages"]})[:3]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writers", type=int, default=3)
    parser.add_argument("--commits", type=int, default=20, help="commits per writer")
    parser.add_argument("--rows", type=int, default=24, help="rows per pair (3 envs x 4 seeds x 2 conditions)")
    parser.add_argument("--stores", default="embedded,ducklake,postgres")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from tests.helpers.postgres import LocalPostgres

    results = []
    with LocalPostgres(fsync=True) as pg, tempfile.TemporaryDirectory() as tmp:
        for kind in args.stores.split(","):
            if kind == "embedded":
                target, data = str(Path(tmp) / "warehouse.duckdb"), ""
            elif kind == "ducklake":
                target, data = "ducklake:postgres:" + pg.create_database("lake"), str(Path(tmp) / "lake") + "/"
            else:
                target, data = pg.create_database("plain"), ""
            results.append(run(kind, target, data, args.writers, args.commits, args.rows))
            print(json.dumps(results[-1]) if args.json else results[-1], flush=True)
    print(f"# {os.cpu_count()} cores, {dt.date.today()}, duckdb {__import__('duckdb').__version__}")


if __name__ == "__main__":
    main()
