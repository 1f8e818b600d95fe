"""The IO manager of published tables: ``load_asset_value`` and downstream inputs read snapshots, not the warehouse.

Why not ``DuckDBPandasIOManager``: it reads ``warehouse.duckdb``, which a pair run or a dbt build holds
locked (a reader then fails with "Could not set lock"), and a consumer in another code location would
have to restate ``partition_expr`` and the schema. This IO manager stores each output as a read-only
Parquet snapshot per partition (``core/publication.py``) and loads inputs from those snapshots, by asset
key and partition alone: any code location sharing ENVDUELS_HOME (or ``root``) loads the same rows.
The asset itself still writes its warehouse rows in one partition-exact transaction; the snapshot is
the published copy. Metadata: ``dagster/uri``, ``dagster/row_count``, ``dagster/column_schema``.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

PUBLISHED_IO_MANAGER_KEY = "envduels_published"


def column_schema(columns: list[tuple[str, str]]) -> dg.TableSchema:
    return dg.TableSchema(columns=[dg.TableColumn(name, ctype) for name, ctype in columns])


class PublishedTableIOManager(dg.ConfigurableIOManager):
    """Publishes DataFrame outputs as Parquet snapshots under ``root`` and loads inputs from them.

    ``root`` empty: $ENVDUELS_HOME/published, resolved when a step runs (loading writes nothing)."""

    root: str = ""

    def snapshot_root(self) -> Path:
        if self.root:
            return Path(self.root)
        from envduels_dagster.settings import envduels_home

        return envduels_home() / "published"

    def handle_output(self, context: dg.OutputContext, obj) -> None:
        from envduels_dagster.core.publication import publish

        table = context.asset_key.path[-1]
        partition = context.asset_partition_key if context.has_asset_partitions else None
        snap = publish(self.snapshot_root(), table, obj, context.run_id, partition)
        context.add_output_metadata({
            "dagster/uri": dg.MetadataValue.path(str(snap.path)),
            "published_run_id": snap.run_id,
            "published_data_version": snap.data_version,
            "snapshot_rewritten": snap.written,
            "dagster/row_count": snap.row_count,
            "dagster/column_schema": column_schema(snap.columns),
        })

    def load_input(self, context: dg.InputContext):
        from envduels_dagster.core.publication import read_snapshot

        table = context.asset_key.path[-1]
        partitions = list(context.asset_partition_keys) if context.has_asset_partitions else None
        return read_snapshot(self.snapshot_root(), table, partitions)
