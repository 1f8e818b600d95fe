"""Benchmark: ``dbt build`` of the marts on the embedded DuckDB file and on the shared DuckLake.

    .venv/bin/python benchmarks/storage_dbt.py [--models 10] [--envs-per-author 20]

Why: the shared profile's warehouse choice (docs/DECISIONS.md) weighs what dbt costs on it. Same
synthetic warehouse as benchmarks/marts.py, written through core/storage/warehouse.py into each store, then
the dbt CLI (models + tests) with the profile's target, as the Dagster asset runs it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--envs-per-author", type=int, default=20)
    args = parser.parse_args()
    from benchmarks.marts import synthetic
    from envduels_dagster.core.storage.location import Warehouse
    from envduels_dagster.core.storage.warehouse import ensure_schema
    from tests.helpers.postgres import LocalPostgres

    episodes, environments, registry = synthetic(args.models, args.envs_per_author, 4)
    dbt = str(Path(sys.executable).with_name("dbt"))
    with LocalPostgres(fsync=True) as pg, tempfile.TemporaryDirectory() as tmp:
        stores = {"embedded": Warehouse(str(Path(tmp) / "warehouse.duckdb")),
                  "ducklake": Warehouse("ducklake:postgres:" + pg.create_database("lake"), f"{tmp}/lake/")}
        for kind, wh in stores.items():
            conn = wh.connect()
            t0 = time.perf_counter()
            ensure_schema(conn)
            for table, df in (("episodes", episodes), ("environments", environments), ("model_registry", registry)):
                conn.register("df", df)
                conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM df")
                conn.unregister("df")
            t_load = time.perf_counter() - t0
            conn.close()
            from envduels_dagster.core.storage import location as storage

            storage.close_all()
            env = {**os.environ, "ENVDUELS_WAREHOUSE": wh.location, "ENVDUELS_LAKE_DATA": wh.data_path,
                   "ENVDUELS_DBT_TARGET": "shared" if wh.shared else "warehouse",
                   "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DBT_LOG_PATH": f"{tmp}/logs"}
            t1 = time.perf_counter()
            proc = subprocess.run([dbt, "build", "--project-dir", str(ROOT / "dbt_project"), "--profiles-dir",
                                   str(ROOT / "dbt_project"), "--target-path", f"{tmp}/target-{kind}"],
                                  env=env, capture_output=True, text=True, cwd=str(ROOT / "dbt_project"))
            t_dbt = time.perf_counter() - t1
            summary = [ln for ln in proc.stdout.splitlines() if "PASS=" in ln]
            print(f"{kind}: {len(episodes):,} episode rows loaded in {t_load:.1f}s; dbt build {t_dbt:.1f}s "
                  f"rc={proc.returncode} {summary[-1].split('Done.')[-1].strip() if summary else proc.stdout[-1500:]}",
                  flush=True)
    print(f"# {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}, duckdb {__import__('duckdb').__version__}")


if __name__ == "__main__":
    main()
