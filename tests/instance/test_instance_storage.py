"""The instance storage the shipped dagster.yaml configures (issue 35): Dagster's SQLite files, pooled writes.

Real Dagster instances on real SQLite files: a partitioned asset with a check materialized through the
project's dagster.yaml, read back by an instance on Dagster's default storage (same files, same
layout), writers in two processes at once on one index shard, the bound on open shards, and a wipe.
"""

from __future__ import annotations

import multiprocessing
import shutil
import time
from pathlib import Path

import dagster as dg
import pytest

from envduels_dagster.instance.storage import MAX_OPEN_SHARDS, PooledSqliteEventLogStorage, PooledSqliteStorage

REPO = Path(__file__).resolve().parents[2]


@dg.asset(partitions_def=dg.StaticPartitionsDefinition(["a", "b", "c"]),
          check_specs=[dg.AssetCheckSpec("rows_positive", asset="numbers")])
def numbers():
    yield dg.MaterializeResult(metadata={"rows": 3})
    yield dg.AssetCheckResult(check_name="rows_positive", passed=True)


def _instance(home: Path, monkeypatch) -> dg.DagsterInstance:
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return dg.DagsterInstance.from_config(str(home))


def _home(tmp_path: Path, yaml: str | None) -> Path:
    home = tmp_path / "dagster"
    home.mkdir(exist_ok=True)
    target = home / "dagster.yaml"
    if yaml is None:
        target.unlink(missing_ok=True)
    else:
        shutil.copy(REPO / yaml, target)
    return home


def test_shipped_yaml_uses_pooled_storage_and_default_storage_reads_the_same_files(tmp_path, monkeypatch):
    home = _home(tmp_path, "dagster.yaml")
    with _instance(home, monkeypatch) as instance:
        assert instance.get_ref().storage_data.class_name == PooledSqliteStorage.__name__
        assert isinstance(instance.event_log_storage, PooledSqliteEventLogStorage)
        runs = [dg.materialize([numbers], instance=instance, partition_key=p).run_id for p in ("a", "b")]
        mats = instance.fetch_materializations(dg.AssetKey("numbers"), limit=10).records
        assert sorted(r.partition_key for r in mats) == ["a", "b"]
        checks = instance.event_log_storage.get_asset_check_execution_history(
            dg.AssetCheckKey(dg.AssetKey("numbers"), "rows_positive"), limit=10)
        assert len(checks) == 2
        counts = {r: len(instance.all_logs(r)) for r in runs}
    for run_id in runs:  # Dagster's own layout: one shard per run beside the index
        assert (home / "history" / "runs" / f"{run_id}.db").exists()
    assert (home / "history" / "runs" / "index.db").exists()
    home = _home(tmp_path, None)  # the same directory, now on Dagster's default storage
    with _instance(home, monkeypatch) as instance:
        assert type(instance.event_log_storage).__name__ == "SqliteEventLogStorage"
        assert {r: len(instance.all_logs(r)) for r in runs} == counts
        mats = instance.fetch_materializations(dg.AssetKey("numbers"), limit=10).records
        assert sorted(r.partition_key for r in mats) == ["a", "b"]


def _write(base_dir: str, run_id: str, n: int) -> None:
    storage = PooledSqliteEventLogStorage(base_dir)
    for i in range(n):
        storage.store_event(_materialization(run_id, f"{run_id}-{i}"))
    storage.dispose()


def _materialization(run_id: str, partition: str):
    from dagster._core.events import DagsterEvent, DagsterEventType, StepMaterializationData
    from dagster._core.events.log import EventLogEntry

    return EventLogEntry(error_info=None, level=20, user_message="", run_id=run_id, timestamp=time.time(),
                         step_key="s", job_name="j", dagster_event=DagsterEvent(
                             DagsterEventType.ASSET_MATERIALIZATION.value, "j",
                             event_specific_data=StepMaterializationData(
                                 dg.AssetMaterialization("numbers", partition=partition))))


def test_two_processes_write_one_index_at_once_and_nothing_is_lost(tmp_path):
    base = str(tmp_path / "runs")
    PooledSqliteEventLogStorage(base).dispose()  # the index shard exists before the writers race
    ctx = multiprocessing.get_context("fork")  # fork: the children need not import Dagster again
    procs = [ctx.Process(target=_write, args=(base, f"run{k}", 40)) for k in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    storage = PooledSqliteEventLogStorage(base)
    try:
        for k in range(2):
            assert len(storage.get_logs_for_run(f"run{k}")) == 40
        records = storage.fetch_materializations(dg.AssetKey("numbers"), limit=1000).records
        assert len(records) == 80
        assert len({r.partition_key for r in records}) == 80
    finally:
        storage.dispose()


def _write_with(storage, run_id: str, n: int) -> None:
    for i in range(n):
        storage.store_event(_materialization(run_id, f"{run_id}-{i}"))


def test_a_forked_child_opens_its_own_connections_and_the_parent_keeps_writing(tmp_path):
    storage = PooledSqliteEventLogStorage(str(tmp_path / "runs"))
    try:
        _write_with(storage, "parent", 3)  # the parent holds pooled connections when it forks
        child = multiprocessing.get_context("fork").Process(target=_write_with, args=(storage, "child", 5))
        child.start()
        child.join(60)
        assert child.exitcode == 0
        _write_with(storage, "parent", 3)
        assert len(storage.get_logs_for_run("child")) == 5
        assert len(storage.get_logs_for_run("parent")) == 6
        assert len(storage.fetch_materializations(dg.AssetKey("numbers"), limit=100).records) == 11
    finally:
        storage.dispose()


def test_open_shards_are_bounded_and_a_wipe_leaves_a_working_storage(tmp_path):
    storage = PooledSqliteEventLogStorage(str(tmp_path / "runs"))
    try:
        for k in range(MAX_OPEN_SHARDS + 1):
            storage.store_event(_materialization(f"r{k}", f"p{k}"))
        assert len(storage._engines) <= MAX_OPEN_SHARDS  # noqa: SLF001 - the bound itself is what is tested
        for k in range(MAX_OPEN_SHARDS + 1):  # evicted shards reopen
            assert len(storage.get_logs_for_run(f"r{k}")) == 1
        storage.wipe()
        assert not list((tmp_path / "runs").glob("r*.db"))  # every run's shard deleted, the index kept
        assert storage.get_logs_for_run("r0") == []
        storage.store_event(_materialization("r0", "again"))
        assert [e.dagster_event.partition for e in storage.get_logs_for_run("r0")] == ["again"]
    finally:
        storage.dispose()


def test_missing_dagster_home_is_named_and_no_storage_is_created(tmp_path, monkeypatch):
    home = _home(tmp_path, "dagster.yaml")
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    with pytest.raises(Exception, match="DAGSTER_HOME"):
        dg.DagsterInstance.from_config(str(home))
    assert not (home / "history").exists()


_OPEN = "import dagster as dg\nwith dg.DagsterInstance.get() as i:\n    i.get_run_records()\n"


def test_processes_opening_a_new_home_at_once_leave_it_usable(tmp_path):
    # Dagster stamps each new SQLite file's schema version with a lock inside one process only; four
    # processes on a fresh home left two rows in alembic_version in 8 of 8 tries before the init lock,
    # and every later open failed ("more than one head present").
    import os
    import sqlite3
    import subprocess
    import sys

    for trial in range(3):
        (tmp_path / str(trial)).mkdir()
        home = _home(tmp_path / str(trial), "dagster.yaml")
        env = dict(os.environ, DAGSTER_HOME=str(home))
        openers = [subprocess.Popen([sys.executable, "-c", _OPEN], env=env, stderr=subprocess.PIPE, text=True)
                   for _ in range(4)]
        errors = [p.communicate(timeout=180)[1] for p in openers]
        assert [p.returncode for p in openers] == [0, 0, 0, 0], errors
        after = subprocess.run([sys.executable, "-c", _OPEN], env=env, capture_output=True, text=True, timeout=180)
        assert after.returncode == 0, after.stderr[-1500:]
        for db in (home / "history" / "runs.db", home / "schedules" / "schedules.db",
                   home / "history" / "runs" / "index.db"):
            with sqlite3.connect(db) as conn:
                assert conn.execute("SELECT count(*) FROM alembic_version").fetchone()[0] == 1, db

