"""Dagster's SQLite instance storage, with event writes that keep their connection (issue 35).

Why: Dagster's ``SqliteEventLogStorage`` builds a SQLAlchemy engine, opens a connection, commits and
closes it for every event it stores, twice for an asset or check event (the run's shard and the
index shard). Closing the last connection of a WAL database checkpoints it, and a commit in WAL mode
at SQLite's default ``synchronous=FULL`` syncs the log: measured, about 9 ms of CPU and 50 ms of wall
per event under load, a third of a demo process's CPU (docs/BENCHMARKS.md "Event writes that cost
little"). Here each shard keeps one engine and one pooled connection while it is in use (the run's
own shard and the index, the last few shards at most), and connections run ``synchronous=NORMAL``,
SQLite's recommended setting for WAL: a commit is durable across a crash of the process; a power
loss may drop the last commits, never corrupt the file. Same files, same schema and layout as
Dagster's default storage: an instance can switch back and forth.

Configured in ``dagster.yaml``::

    storage:
      custom:
        module: envduels_dagster.instance.storage
        class: PooledSqliteStorage
        config:
          base_dir:
            env: DAGSTER_HOME
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
from collections.abc import Iterator
from typing import Any

from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import SqliteScheduleStorage
from dagster._core.storage.sqlite_storage import (
    DagsterSqliteStorage,
    _event_logs_directory,
    _runs_directory,
    _schedule_directory,
)
from dagster._serdes import ConfigurableClassData
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import QueuePool

SQLITE_BUSY_TIMEOUT_S = 120  # Dagster's own busy timeout for its SQLite shards
MAX_OPEN_SHARDS = 8  # a process writes its run's shard and the index; the webserver reads a few runs at a time
SYNCHRONOUS = "NORMAL"
INIT_LOCK = ".storage-init.lock"  # in DAGSTER_HOME's storage directory


@contextlib.contextmanager
def _one_process_at_a_time(base_dir: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``base_dir``'s init lock while the SQLite files are created or checked.

    Why: Dagster creates and stamps each SQLite database (``runs.db``, ``schedules.db``, the event
    index) the first time a process opens the instance, guarded only by a lock inside the process.
    Several processes opening a new home at once (``envduels run`` and its run workers, the daemon
    and the webserver, a test's workers) each stamp the schema version, leaving two rows in
    ``alembic_version``; every later open then fails with "Version table 'alembic_version' has more
    than one head present" (measured: 4 processes on a fresh home broke it in 8 of 8 tries). The lock
    is released when the process dies, so a killed opener never blocks the next one.
    """
    os.makedirs(base_dir, exist_ok=True)
    fd = os.open(os.path.join(base_dir, INIT_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _pragmas(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.execute(f"PRAGMA synchronous={SYNCHRONOUS}")


class PooledSqliteEventLogStorage(SqliteEventLogStorage):
    """``SqliteEventLogStorage`` whose shards keep one engine and one pooled connection each (LRU)."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None):
        self._engines: collections.OrderedDict[str, Engine] = collections.OrderedDict()
        self._pid = os.getpid()
        super().__init__(base_dir, inst_data=inst_data)

    def _engine(self, shard: str) -> Engine:
        if os.getpid() != self._pid:  # a forked child: never touch the parent's SQLite connections
            for inherited in self._engines.values():
                inherited.dispose(close=False)
            self._engines.clear()
            self._pid = os.getpid()
        engine = self._engines.get(shard)
        if engine is None:
            engine = create_engine(self.conn_string_for_shard(shard), poolclass=QueuePool, pool_size=1,
                                   max_overflow=2, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S,
                                                                 "check_same_thread": False})
            event.listen(engine, "connect", _pragmas)
            self._engines[shard] = engine
            while len(self._engines) > MAX_OPEN_SHARDS:
                _, oldest = self._engines.popitem(last=False)
                oldest.dispose()
        self._engines.move_to_end(shard)
        return engine

    @contextlib.contextmanager
    def _connect(self, shard: str) -> Iterator[Any]:  # type: ignore[override]
        # the same as Dagster's, with the engine kept: one lock per storage, a transaction per use
        with self._db_lock:
            engine = self._engine(shard)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn:
                with conn.begin():
                    yield conn

    def _close_all(self) -> None:
        with self._db_lock:
            while self._engines:
                self._engines.popitem()[1].dispose()

    def wipe(self) -> None:
        self._close_all()  # the shards' files are deleted: no connection may keep writing to them
        super().wipe()

    def dispose(self) -> None:
        self._close_all()
        super().dispose()


class PooledSqliteStorage(DagsterSqliteStorage):
    """Dagster's default SQLite instance storage with :class:`PooledSqliteEventLogStorage` for events."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None):
        # DagsterSqliteStorage.__init__ with the event log storage swapped (the same three directories)
        self.base_dir = base_dir
        with _one_process_at_a_time(base_dir):
            self._run_storage = SqliteRunStorage.from_local(_runs_directory(base_dir))
            self._event_log_storage = PooledSqliteEventLogStorage(_event_logs_directory(base_dir))
            self._schedule_storage = SqliteScheduleStorage.from_local(_schedule_directory(base_dir))
        self._inst_data = inst_data
        super(DagsterSqliteStorage, self).__init__()

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData, config_value: Any) -> PooledSqliteStorage:  # type: ignore[override]
        return cls.from_local(inst_data=inst_data, **config_value)
