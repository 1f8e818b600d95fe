"""Read-only snapshots of published tables: what consumers read while the pipeline writes.

Why snapshots: DuckDB lets one process hold ``warehouse.duckdb`` for writing and then refuses every
other process, even read-only ("Could not set lock on file"); a pair run holds it for a transaction
and dbt for a whole build. So the write path keeps its partition-exact transactions in the warehouse,
and every publication also writes an immutable Parquet file per partition,

    <root>/<table>/<partition>.parquet      (unpartitioned tables: <root>/<table>/_all.parquet)

written to a temporary name, fsynced and renamed into place: a reader opens the old file or the new
one, never a half-written one, and never takes a lock. Each row carries its provenance
(``PROVENANCE``): the run that produced this content and the content's version, a hash of the rows
without provenance, so an unchanged table keeps its version (and its file) and triggers nothing
downstream. Plain DuckDB and pandas, no Dagster: the IO manager, notebooks and other teams share it.

Write-audit-publish: a materialization does not write the published file. It *stages* its rows
(``stage``) under ``<root>/.staged/<table>/<run id>/<partition>.parquet`` — outside every table
folder, so no reader, glob or ``read_snapshot`` sees it — and the asset's checks, once they all
passed, ``promote`` that staged file by an atomic rename onto the published name (or ``discard`` it
when a check failed). Until then readers keep the last snapshot that passed. The staged rows already
carry the run id of the materialization, so the published rows name the run that produced them.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

PROVENANCE = ["run_id", "data_version"]  # appended to every published row
UNPARTITIONED = "_all"
TMP_PREFIX = ".tmp-"
STAGED = ".staged"  # <root>/.staged/<table>/<run id>/<partition>.parquet: written, not yet audited


@dataclass(frozen=True)
class Snapshot:
    path: Path
    data_version: str
    run_id: str
    row_count: int
    columns: list[tuple[str, str]]  # (name, DuckDB type), provenance included
    written: bool  # False: the content was unchanged and the earlier snapshot (and run id) kept


def snapshot_path(root: str | Path, table: str, partition: str | None = None) -> Path:
    """Where ``table``'s snapshot for ``partition`` lives (partition keys are model names: no '/')."""
    if partition is not None and ("/" in partition or partition.startswith(".")):
        raise ValueError(f"partition key {partition!r} of table {table!r} cannot name a snapshot file")
    return Path(root) / table / f"{partition if partition is not None else UNPARTITIONED}.parquet"


def content_version(df: pd.DataFrame) -> str:
    """A stable hash of the rows (columns in order, provenance excluded): equal content, equal version."""
    body = df.drop(columns=[c for c in PROVENANCE if c in df.columns])
    canonical = body.to_json(orient="split", index=False, date_format="iso", double_precision=15)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _casts(table: str, columns: list[str]) -> str:
    """SELECT list casting columns to their warehouse types (list columns would otherwise lose UBIGINT)."""
    from envduels_dagster.core.storage.warehouse import SCHEMA

    declared = {c: "VARCHAR" for c in PROVENANCE}
    for column in SCHEMA.get(table, "").split(","):
        if column.strip():
            name, ctype = column.split()[:2]
            declared[name] = ctype
    return ", ".join(f'CAST("{c}" AS {declared[c]}) AS "{c}"' if c in declared else f'"{c}"' for c in columns)


def read_version(path: Path) -> str | None:
    """The data version recorded in a snapshot's Parquet key-value metadata (None: no snapshot)."""
    import duckdb

    if not path.is_file():
        return None
    with duckdb.connect() as conn:
        rows = conn.execute("SELECT value FROM parquet_kv_metadata(?) WHERE key = 'data_version'",
                            [str(path)]).fetchall()
    return rows[0][0].decode() if rows else None


def staged_path(root: str | Path, table: str, run_id: str, partition: str | None = None) -> Path:
    """Where the run ``run_id`` stages ``table``/``partition`` before its checks (never read by consumers)."""
    if not run_id or "/" in run_id or run_id.startswith("."):
        raise ValueError(f"run id {run_id!r} cannot name a staging folder")
    return Path(root) / STAGED / table / run_id / snapshot_path(root, table, partition).name


def _write(path: Path, table: str, df: pd.DataFrame, run_id: str, version: str) -> None:
    """Write ``df`` (plus provenance) as Parquet at ``path``: temporary name, fsync, atomic rename."""
    import duckdb

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f"{TMP_PREFIX}{uuid.uuid4().hex}.parquet"
    body = df.drop(columns=[c for c in PROVENANCE if c in df.columns]).assign(run_id=run_id, data_version=version)
    meta = json.dumps({"data_version": version, "run_id": run_id, "table": table})
    try:
        with duckdb.connect() as conn:
            conn.register("rows", body)
            select = _casts(table, list(body.columns)) if len(body.columns) else "*"
            conn.execute(f"COPY (SELECT {select} FROM rows) TO '{tmp}' (FORMAT PARQUET, KV_METADATA "
                         f"{{data_version: '{version}', run_id: '{run_id}', envduels: '{meta}'}})")
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def publish(root: str | Path, table: str, df: pd.DataFrame, run_id: str, partition: str | None = None,
            data_version: str | None = None) -> Snapshot:
    """Write ``df`` as the snapshot of ``table``/``partition`` unless the same content is already published.

    Unaudited: the IO manager stages and the checks promote instead (``stage``/``promote``)."""
    version = data_version or content_version(df)
    path = snapshot_path(root, table, partition)
    if read_version(path) == version:
        return describe(path, written=False)
    _write(path, table, df, run_id, version)
    return describe(path, written=True)


def stage(root: str | Path, table: str, df: pd.DataFrame, run_id: str, partition: str | None = None,
          data_version: str | None = None) -> Snapshot:
    """Stage ``df`` for run ``run_id``: invisible to readers until ``promote``; older staged copies of the
    same table/partition (runs whose checks never ran) are removed, a newer materialization supersedes them."""
    path = staged_path(root, table, run_id, partition)
    for other in (Path(root) / STAGED / table).glob(f"*/{path.name}"):
        if other != path:
            _remove_staged(other)
    _write(path, table, df, run_id, data_version or content_version(df))
    return describe(path, written=True)


def _remove_staged(path: Path) -> None:
    path.unlink(missing_ok=True)
    for folder in (path.parent, path.parent.parent, path.parent.parent.parent):  # run, table, .staged
        try:
            folder.rmdir()  # only when empty
        except OSError:
            break


def promote(root: str | Path, table: str, run_id: str, partition: str | None = None) -> Snapshot | None:
    """Publish what run ``run_id`` staged for ``table``/``partition`` (its checks passed): an atomic rename
    onto the published name. Unchanged content keeps the published file, its run id and version.
    None: nothing staged by that run and its rows are not the published ones (superseded or discarded)."""
    staged, path = staged_path(root, table, run_id, partition), snapshot_path(root, table, partition)
    if not staged.is_file():
        if path.is_file() and (snap := describe(path)).run_id == run_id:
            return snap  # already promoted (the checks re-run)
        return None
    if read_version(path) == read_version(staged):
        _remove_staged(staged)
        return describe(path, written=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staged, path)
    _remove_staged(staged)  # the now-empty staging folders
    return describe(path, written=True)


def discard(root: str | Path, table: str, run_id: str, partition: str | None = None) -> bool:
    """Drop what run ``run_id`` staged (a check failed): the published snapshot stays the last that passed."""
    staged = staged_path(root, table, run_id, partition)
    existed = staged.is_file()
    _remove_staged(staged)
    return existed


def describe(path: Path, written: bool = False) -> Snapshot:
    """Row count, columns and provenance of a published snapshot."""
    import duckdb

    with duckdb.connect() as conn:
        columns = [(r[0], r[1]) for r in conn.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()]
        (count,) = conn.execute("SELECT count(*) FROM read_parquet(?)", [str(path)]).fetchone()
        kv = dict(conn.execute("SELECT key, value FROM parquet_kv_metadata(?)", [str(path)]).fetchall())
    return Snapshot(path=path, written=written, data_version=kv.get(b"data_version", b"").decode(),
                    run_id=kv.get(b"run_id", b"").decode(), row_count=int(count), columns=columns)


def read_snapshot(root: str | Path, table: str, partitions: list[str] | None = None) -> pd.DataFrame:
    """The published rows of ``table`` (all the given partitions, concatenated; None: unpartitioned)."""
    import duckdb

    paths = [snapshot_path(root, table, p) for p in partitions] if partitions is not None \
        else [snapshot_path(root, table)]
    if missing := [p for p in paths if not p.is_file()]:
        raise FileNotFoundError(f"table {table!r} has no published snapshot at {missing[0]}: materialize it "
                                f"(it is published when its asset runs) or check ENVDUELS_HOME / the snapshot root")
    with duckdb.connect() as conn:
        return conn.execute("SELECT * FROM read_parquet(?, union_by_name = true)", [[str(p) for p in paths]]).df()
