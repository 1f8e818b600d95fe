"""Where the warehouse lives, and how to open it: an embedded DuckDB file or a shared DuckLake.

Why two kinds and one opener: a DuckDB file admits one writer process at a time (fine on one
laptop, useless for several machines); DuckLake keeps the same DuckDB SQL, dbt-duckdb and marts
but puts the catalog in Postgres and the data in Parquet files, so several processes write and
read at once (docs/DECISIONS.md has the measurements that chose it). Callers name a *location*:

* a file path (``.../warehouse.duckdb``) -- the embedded default, opened as before;
* ``ducklake:postgres:<libpq conninfo>`` -- the shared profile; Parquet files go to ``data_path``.

The DuckDB extensions DuckLake needs (``ducklake``, ``postgres_scanner``) are loaded from the
PyPI wheels ``duckdb-extension-ducklake`` / ``duckdb-extension-postgres-scanner`` by file path,
with auto-install and auto-load off: DuckDB would otherwise fetch them from the internet.

DuckLake commits optimistically and detects conflicts per table: two writers replacing different
partitions of one table may still conflict at COMMIT. :func:`retry_conflicts` re-runs a whole
transaction on such a conflict (measured: about every other commit retried once with three writers
replacing pairs of ``episodes``; docs/BENCHMARKS.md).
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

DUCKLAKE_PREFIX = "ducklake:"
# The catalog alias every connection uses, in both profiles' dbt targets too: relation names in the
# dbt manifest stay the same whatever the location.
ALIAS = "warehouse"
_EXTENSION_WHEELS = {"postgres_scanner": "duckdb_extension_postgres_scanner", "ducklake": "duckdb_extension_ducklake"}

T = TypeVar("T")


class StorageConfigError(RuntimeError):
    pass


LOCK_FIRST_DELAY_S, LOCK_MAX_DELAY_S = 0.1, 2.0  # Warehouse.connect(wait_s=...)'s backoff on a held file


def is_lock_error(exc: BaseException) -> bool:
    """A DuckDB error saying another process holds the file (duckdb raises ``_duckdb.IOException``)."""
    return type(exc).__module__.lstrip("_").startswith("duckdb") and "lock" in str(exc).lower()


def is_ducklake(location: str) -> bool:
    return str(location).startswith(DUCKLAKE_PREFIX)


def extension_file(name: str) -> str:
    """Path of a DuckDB extension shipped by its PyPI wheel, for ``LOAD '<path>'``."""
    import importlib

    import duckdb

    module_name = _EXTENSION_WHEELS[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise StorageConfigError(
            f"the shared warehouse needs the DuckDB extension {name!r}, shipped by the PyPI wheel "
            f"{module_name.replace('_', '-')}; install the shared extra: pip install 'envduels-dagster[shared]'"
        ) from None
    root = Path(module.__file__).parent / "extensions"
    wanted = root / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if wanted.exists():
        return str(wanted)
    found = sorted(root.glob(f"*/{name}.duckdb_extension"))
    raise StorageConfigError(
        f"{module_name} has no {name} extension for DuckDB {duckdb.__version__} (it has "
        f"{[p.parent.name for p in found] or 'none'}); install the wheel version equal to duckdb's")


@dataclass(frozen=True)
class Warehouse:
    """A warehouse location plus, for DuckLake, where its Parquet files go."""

    location: str
    data_path: str = ""
    options: dict[str, str] = field(default_factory=dict)

    @property
    def shared(self) -> bool:
        return is_ducklake(self.location)

    def connect(self, read_only: bool = False, wait_s: float = 0.0, on_wait: Callable[[str], None] | None = None):
        """A DuckDB connection whose current catalog is the warehouse (close it when done).

        For DuckLake it is a cursor of one connection per process and warehouse: loading the two
        extensions verifies their signatures (~0.7 s for 80 MB) and attaching reads the catalog,
        which a pair run would otherwise pay on every write. A cursor shares them and is cheap.

        ``wait_s``: a DuckDB file another process holds (its writer's lock) is tried again with backoff for up
        to that long, ``on_wait`` told once; then the lock error is raised (the CLI names the file and the
        remedy). A reader of a file that a second demo or a dbt build is writing waits its turn (issue 33)."""
        import duckdb

        if not self.shared:
            deadline, delay = time.monotonic() + wait_s, LOCK_FIRST_DELAY_S
            while True:
                try:
                    return duckdb.connect(self.location, read_only=read_only)
                except duckdb.IOException as exc:
                    if not is_lock_error(exc) or time.monotonic() + delay > deadline:
                        raise
                    if on_wait is not None:
                        on_wait(f"the warehouse {self.location} is in use by another process; waiting up to "
                                f"{wait_s:.0f} s for it")
                        on_wait = None
                    time.sleep(delay)
                    delay = min(delay * 2, LOCK_MAX_DELAY_S)
        cursor = _root(self, read_only).cursor()
        cursor.execute(f"USE {ALIAS}")
        return cursor

    def open_root(self, read_only: bool = False):
        """A new DuckDB connection with the extensions loaded and the DuckLake attached."""
        import duckdb

        conn = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
        try:
            for name in ("postgres_scanner", "ducklake"):
                conn.execute(f"LOAD '{extension_file(name)}'")
            options = [f"DATA_PATH '{_quote(self.data_path)}'"] if self.data_path else []
            options += [f"{k.upper()} '{_quote(v)}'" for k, v in self.options.items()]
            if read_only:
                options.append("READ_ONLY")
            attach = f"ATTACH '{_quote(self.location)}' AS {ALIAS}"
            retry_conflicts(lambda: conn.execute(attach + (f" ({', '.join(options)})" if options else "")))
            conn.execute(f"USE {ALIAS}")
        except BaseException:
            conn.close()
            raise
        return conn


_ROOTS: dict[tuple, tuple[int, Any]] = {}
_ROOTS_LOCK = threading.Lock()


def _root(warehouse: Warehouse, read_only: bool):
    key = (warehouse.location, warehouse.data_path, tuple(sorted(warehouse.options.items())), read_only)
    with _ROOTS_LOCK:
        pid, conn = _ROOTS.get(key, (None, None))
        if pid != os.getpid():  # never reuse a connection inherited through fork
            conn = warehouse.open_root(read_only)
            _ROOTS[key] = (os.getpid(), conn)
        return conn


def close_all() -> None:
    """Close this process's shared DuckLake connections (tests; a process exit does it too)."""
    with _ROOTS_LOCK:
        for pid, conn in _ROOTS.values():
            if pid == os.getpid():
                conn.close()
        _ROOTS.clear()


def _quote(text: str) -> str:
    return str(text).replace("'", "''")


def catalog_kind(conn) -> str:
    """``'ducklake'`` or ``'duckdb'``: the type of the connection's current catalog."""
    row = conn.execute("SELECT type FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    return row[0] if row else "duckdb"


def is_transaction_conflict(exc: BaseException) -> bool:
    """A DuckDB/DuckLake commit that lost a race with another writer (safe to re-run whole)."""
    text = str(exc).lower()
    return type(exc).__module__.startswith(("duckdb", "_duckdb")) and (
        "conflict" in text or "concurrent" in text or "retry" in text
        or "duplicate key value violates unique constraint" in text  # two catalog inserts raced in Postgres
        # two first processes initialized a new DuckLake at once (found by tests/flows/test_shared_storage.py)
        or ("failed to initialize ducklake" in text and "already exists" in text))


@dataclass
class RetryStats:
    """Conflicts retried by this process (reported by writers and benchmarks)."""

    conflicts: int = 0
    gave_up: int = 0


STATS = RetryStats()


def retry_conflicts(work: Callable[[], T], attempts: int = 30, base_s: float = 0.02, max_s: float = 1.0,
                    on_conflict: Callable[[int, BaseException], None] | None = None) -> T:
    """Run ``work`` (a whole transaction) again, with jittered exponential backoff, while it conflicts."""
    for attempt in range(1, attempts + 1):
        try:
            return work()
        except Exception as exc:
            if not is_transaction_conflict(exc):
                raise
            STATS.conflicts += 1
            if on_conflict is not None:
                on_conflict(attempt, exc)
            if attempt == attempts:
                STATS.gave_up += 1
                raise
            time.sleep(random.uniform(0, min(max_s, base_s * 2 ** attempt)))
    raise AssertionError("unreachable")


# Hidden work in progress beside published versions (removed by the next writer: training_export, imports).
TMP_PREFIX = ".tmp-"


def switch_latest(root: Path, version: str) -> None:
    """Point ``root/latest`` at ``version`` atomically (a reader sees the old or the new target, never neither).

    Shared by the training exports and the staged imports: a storage primitive, so neither imports the other."""
    tmp_link = root / f"{TMP_PREFIX}latest-{uuid.uuid4().hex}"
    os.symlink(version, tmp_link)
    os.replace(tmp_link, root / "latest")
