"""Benchmark (issue 35): CPU and wall per stored Dagster event, per event-log storage, in one process.

    .venv/bin/python benchmarks/event_write_cost.py [--events 300] [--repeats 2] [--postgres]

Stores the same events (half log lines, half asset materializations, which Dagster also mirrors into the
index shard) through each storage, the storages alternating, ``--repeats`` times each:

* ``sqlite (Dagster default)``: ``SqliteEventLogStorage`` (an engine, a connection, a commit and a close
  per event and shard);
* ``sqlite consolidated``: Dagster's ``ConsolidatedSqliteEventLogStorage`` (one file);
* ``pooled, synchronous=FULL`` and ``pooled, synchronous=NORMAL (shipped)``: this project's
  ``PooledSqliteEventLogStorage`` (envduels_dagster/instance/storage.py);
* with ``--postgres``: dagster-postgres' ``PostgresEventLogStorage`` on a throwaway local cluster
  (tests/helpers/postgres.py, fsync on).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def events(run_id: str, n: int) -> list:
    import dagster as dg
    from dagster._core.events import DagsterEvent, DagsterEventType, StepMaterializationData
    from dagster._core.events.log import EventLogEntry

    out = []
    for i in range(n):
        event = None if i % 2 == 0 else DagsterEvent(
            DagsterEventType.ASSET_MATERIALIZATION.value, "pair_job",
            event_specific_data=StepMaterializationData(dg.AssetMaterialization("duel_episodes", partition=f"a|s{i}")))
        out.append(EventLogEntry(error_info=None, level=20, user_message="pair written", run_id=run_id,
                                 timestamp=time.time(), step_key="duel_episodes", job_name="pair_job",
                                 dagster_event=event))
    return out


def storages(work: Path, pg_url: str | None) -> dict:
    from dagster._core.storage.event_log.sqlite.consolidated_sqlite_event_log import (
        ConsolidatedSqliteEventLogStorage,
    )
    from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

    from envduels_dagster.instance import storage as instance_storage

    def pooled(sync: str):
        def make(path: str):
            instance_storage.SYNCHRONOUS = sync
            return instance_storage.PooledSqliteEventLogStorage(path)
        return make

    out = {"sqlite (Dagster default)": SqliteEventLogStorage,
           "sqlite consolidated (Dagster)": ConsolidatedSqliteEventLogStorage,
           "pooled, synchronous=FULL": pooled("FULL"),
           "pooled, synchronous=NORMAL (shipped)": pooled("NORMAL")}
    if pg_url:
        from dagster_postgres import PostgresEventLogStorage

        out["postgres (dagster-postgres)"] = lambda _path: PostgresEventLogStorage(pg_url)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="envduels-eventcost-"))
    pg = None
    if args.postgres:
        from tests.helpers.postgres import LocalPostgres

        pg = LocalPostgres(fsync=True).start()
    try:
        makers = storages(work, pg.create_database("events").replace("postgresql://", "postgresql+psycopg2://", 1) if pg else None)
        print(f"nproc={os.cpu_count()} load1={os.getloadavg()[0]:.1f}; {args.events} events a block "
              f"(half materializations)", flush=True)
        results: dict[str, list[tuple[float, float]]] = {k: [] for k in makers}
        for rep in range(args.repeats):
            for label, make in makers.items():
                storage = make(str(work / f"{rep}-{len(results[label])}-{abs(hash(label))}"))
                batch = events(f"run-{rep}-{abs(hash(label))}", args.events)
                c0, t0 = time.process_time(), time.perf_counter()
                for e in batch:
                    storage.store_event(e)
                cpu, wall = time.process_time() - c0, time.perf_counter() - t0
                storage.dispose()
                results[label].append((1000 * cpu / args.events, 1000 * wall / args.events))
                print(f"  {label:40s} cpu {results[label][-1][0]:6.2f} ms/event  wall {results[label][-1][1]:6.2f} "
                      f"ms/event  (load1 {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        if pg:
            pg.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
