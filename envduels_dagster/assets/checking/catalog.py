"""Shared helpers of the check modules: warehouse reads, partition keys, spec construction.

Checks read the rows they guard from the warehouse (``DuckDBResource`` named
``warehouse``); for partitioned assets only the rows of the partition just
materialized. Assets are referenced by ``AssetKey`` (not imported), so a check keeps
working when an asset is reimplemented (e.g. ``pair_lift`` moving to dbt).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, get_args

import dagster as dg

if TYPE_CHECKING:
    import pandas as pd

from envduels_dagster.core.protocol import Condition, EpisodeStatus, StopReason

STATUSES = list(get_args(EpisodeStatus))
CONDITIONS = list(get_args(Condition))
STOP_REASONS = list(get_args(StopReason))
INCOMPLETE_STOP_REASONS = ["env_error", "llm_error", "length", "stopped_at_budget"]


class Catalog:
    """Tables and views of the warehouse and their columns, read with one query.

    A table is found by name in any schema (``main`` preferred), so a mart that dbt
    builds into another schema is still found.
    """

    def __init__(self, conn):
        rows = conn.execute(
            "SELECT table_schema, table_name, column_name FROM information_schema.columns "
            "ORDER BY table_schema <> 'main', table_schema, ordinal_position").fetchall()
        self._tables: dict[str, str] = {}
        self._columns: dict[str, list[str]] = {}
        for schema, table, column in rows:
            qualified = f'"{schema}"."{table}"'
            self._tables.setdefault(table.lower(), qualified)
            if self._tables[table.lower()] == qualified:
                self._columns.setdefault(table.lower(), []).append(column)

    def table(self, name: str) -> str | None:
        """The qualified name of table or view ``name``, or None if absent."""
        return self._tables.get(name.lower())

    def columns(self, name: str) -> list[str]:
        return list(self._columns.get(name.lower(), []))


def query(conn, sql: str, params: list | None = None) -> pd.DataFrame:
    return conn.execute(sql, params or []).df()


class MissingTable(Exception):
    """A table a check reads is absent; every check of the suite fails with this message."""


def load_or_error(load, *args):
    """``load(*args)``, or the MissingTable it raised (returned, so the caller can fail its checks)."""
    try:
        return load(*args)
    except MissingTable as exc:
        return exc


def missing_table_message(name: str, asset: str) -> str:
    return f"table {name} not found in the warehouse: materialize {asset} first"


def partition_keys(context, partitions_def: dg.PartitionsDefinition | None = None) -> dict[str, str]:
    """The partition being checked, split by dimension when multi-partitioned ({} if unpartitioned).

    A check-only run launched with just the ``dagster/partition`` tag carries the key as a
    string ("author|solver"); ``partitions_def`` parses it back into its dimensions.
    """
    if not context.has_partition_key:
        return {}
    key = context.partition_key
    if isinstance(key, str) and isinstance(partitions_def, dg.MultiPartitionsDefinition):
        key = partitions_def.get_partition_key_from_str(key)
    by_dim = getattr(key, "keys_by_dimension", None)
    return dict(by_dim) if by_dim else {"key": str(key)}


def spec(name: str, asset: dg.AssetKey, description: str, *, blocking: bool = False,
         partitions_def: dg.PartitionsDefinition | None = None) -> dg.AssetCheckSpec:
    with warnings.catch_warnings():  # partitioned check specs are marked preview in Dagster 1.13
        warnings.simplefilter("ignore")
        return dg.AssetCheckSpec(name, asset=asset, description=description, blocking=blocking,
                                 partitions_def=partitions_def)
