"""Pair runs in separate processes on the shared profile give the embedded default's results.

Why: the shared profile exists so that several run workers write the warehouse and the call
cache at once. Here three processes materialize their pairs concurrently (Dagster instance,
call cache and DuckLake catalog on a real Postgres, Parquet files on disk) while this process
reads the warehouse; afterwards episodes, environments and the dbt marts equal those of one
process on the embedded default with the same registry.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.helpers.pair_runs import ENVS_PER_AUTHOR, SEEDS
from tests.helpers.paths import REPO
from tests.helpers.pipeline import write_registry
from tests.helpers.postgres import pg  # noqa: F401 - pg is a fixture (a Postgres server for the module)

pytestmark = pytest.mark.slow

ROOT = REPO
MODELS = ["oracle", "journeyman", "novice"]
ROWS_PER_PAIR = ENVS_PER_AUTHOR * len(SEEDS) * 2
VOLATILE = ["materialized_at", "latency_s"]


def _stage(env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.helpers.pair_runs", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(*procs: subprocess.Popen) -> None:
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, out[-4000:]


def _profile_env(tmp: Path, registry: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVDUELS_", "DAGSTER_"))}
    env.update(ENVDUELS_HOME=str(tmp / "home"), DAGSTER_HOME=str(tmp / "dagster"), ENVDUELS_REGISTRY=str(registry),
               PYTHONPATH=str(ROOT), **extra)
    (tmp / "dagster").mkdir(parents=True, exist_ok=True)
    return env


def _tables(conn) -> dict:
    from envduels_dagster.core.storage.warehouse import read_table

    episodes = read_table(conn, "episodes").drop(columns=VOLATILE)
    environments = read_table(conn, "environments").drop(columns=["materialized_at"])
    lift = conn.execute("SELECT * FROM pair_lift").df()
    keys = {"episodes": ["author", "solver", "env_id", "condition", "seed"], "environments": ["env_id"],
            "pair_lift": ["author", "solver"]}
    frames = {"episodes": episodes, "environments": environments, "pair_lift": lift}
    return {name: df.sort_values(keys[name]).reset_index(drop=True) for name, df in frames.items()}


def test_pair_runs_in_separate_processes_share_warehouse_cache_and_instance_and_match_the_embedded_default(
        pg, tmp_path):  # noqa: F811
    import pandas as pd

    from envduels_dagster.core.storage.location import Warehouse

    registry = write_registry(tmp_path / "models.yaml", MODELS)
    pairs = [f"{a}|{s}" for a in MODELS for s in MODELS]

    url = pg.create_database("envduels")
    shared = _profile_env(tmp_path / "shared", registry, ENVDUELS_STORAGE="shared",
                          ENVDUELS_POSTGRES_URL=url.replace("postgresql://", "postgresql+psycopg2://"),
                          ENVDUELS_LAKE_DATA=str(tmp_path / "shared" / "lake") + "/")
    (tmp_path / "shared" / "dagster" / "dagster.yaml").write_text((ROOT / "deploy" / "dagster-postgres.yaml").read_text())
    embedded = _profile_env(tmp_path / "embedded", registry)

    # The embedded reference, one process, meanwhile (it shares nothing with the shared profile).
    reference = _stage(embedded, "registry")
    _finish(_stage(shared, "registry"))
    _finish(_stage(shared, "authors", ",".join(MODELS)), reference)
    reference = _stage(embedded, "authors", ",".join(MODELS))

    lake = Warehouse("ducklake:postgres:" + url, shared["ENVDUELS_LAKE_DATA"])
    seen, stop = [], threading.Event()

    def read_meanwhile():
        while not stop.is_set():
            with lake.connect() as conn:
                seen.append(conn.execute("SELECT author, solver, count(*) FROM episodes GROUP BY ALL").fetchall())
            stop.wait(0.2)

    reader = threading.Thread(target=read_meanwhile)
    reader.start()
    workers = [_stage(shared, "pairs", ",".join(p for p in pairs if p.startswith(a + "|"))) for a in MODELS]
    try:
        _finish(*workers)
    finally:
        stop.set()
        reader.join()
    _finish(reference)
    _finish(_stage(embedded, "pairs", ",".join(pairs)))
    _finish(_stage(shared, "marts"), _stage(embedded, "marts"))

    with lake.connect() as conn:
        got = _tables(conn)
    final = got["episodes"].groupby(["author", "solver"]).size().to_dict()
    # Rejected environments have no episodes, so a pair's rows are its final count, whole or absent.
    half = [(a, s, n) for snapshot in seen for a, s, n in snapshot if n != final[(a, s)]]
    assert len(seen) >= 2 and not half, f"the reader saw half-written pairs: {half[:5]}"
    import duckdb

    with duckdb.connect(str(tmp_path / "embedded" / "home" / "warehouse.duckdb"), read_only=True) as conn:
        want = _tables(conn)
    assert len(final) == len(pairs) and max(final.values()) == ROWS_PER_PAIR  # nothing lost
    for name in want:
        pd.testing.assert_frame_equal(got[name], want[name], check_dtype=False, obj=name)

    import psycopg2

    with psycopg2.connect(url) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM envduels_calls")
        (calls,) = cur.fetchone()
        cur.execute("SELECT count(*) FROM runs WHERE status = 'SUCCESS'")
        (runs,) = cur.fetchone()
    assert calls > 0, "the shared call cache stayed empty"
    assert runs == 1 + len(MODELS) + len(pairs) + 1  # every run in the Postgres instance
