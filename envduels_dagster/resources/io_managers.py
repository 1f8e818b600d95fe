"""The IO manager of published tables: ``load_asset_value`` and downstream inputs read snapshots, not the warehouse.

Why not ``DuckDBPandasIOManager``: it reads ``warehouse.duckdb``, which a pair run or a dbt build holds
locked (a reader then fails with "Could not set lock"), and a consumer in another code location would
have to restate ``partition_expr`` and the schema. This IO manager stores each output as a read-only
Parquet snapshot per partition (``core/training/publication.py``) and loads inputs from those snapshots, by asset
key and partition alone: any code location sharing ENVDUELS_HOME (or ``root``) loads the same rows.
The asset itself still writes its warehouse rows in one partition-exact transaction; the snapshot is
the published copy. Metadata: ``dagster/uri``, ``dagster/row_count``, ``dagster/column_schema``.

Write-audit-publish: ``handle_output`` only *stages* the rows (keyed by run id, invisible to readers);
the asset's checks call ``settle`` once they have all been evaluated, which promotes the staged rows to
the published snapshot if every check passed and discards them otherwise. ``load_input`` (so
``load_asset_value`` and downstream inputs) reads the published snapshot only: the last set that passed.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

PUBLISHED_IO_MANAGER_KEY = "envduels_published"


def column_schema(columns: list[tuple[str, str]], table: str | None = None) -> dg.TableSchema:
    """The snapshot's columns, each with its description (``core/storage/column_docs.py``) when ``table`` documents it."""
    from envduels_dagster.core.storage.column_docs import describe

    return dg.TableSchema(columns=[dg.TableColumn(name, ctype, description=describe(table, name) if table else None)
                                   for name, ctype in columns])


class PublishedTableIOManager(dg.ConfigurableIOManager):
    """Publishes DataFrame outputs as Parquet snapshots under ``root`` and loads inputs from them.

    ``root`` empty: $ENVDUELS_HOME/published, resolved when a step runs (loading writes nothing)."""

    root: str = ""

    def snapshot_root(self) -> Path:
        if self.root:
            return Path(self.root)
        from envduels_dagster.settings.locations import envduels_home

        return envduels_home() / "published"

    def handle_output(self, context: dg.OutputContext, obj) -> None:
        from envduels_dagster.core.training.publication import snapshot_path, stage

        table = context.asset_key.path[-1]
        partition = context.asset_partition_key if context.has_asset_partitions else None
        snap = stage(self.snapshot_root(), table, obj, context.run_id, partition)
        context.add_output_metadata({
            "dagster/uri": dg.MetadataValue.path(str(snapshot_path(self.snapshot_root(), table, partition))),
            "staged_snapshot": dg.MetadataValue.path(str(snap.path)),
            "publication": "staged: replaces the published snapshot once this materialization's checks pass",
            "snapshot_data_version": snap.data_version,
            "dagster/row_count": snap.row_count,
            "dagster/column_schema": column_schema(snap.columns, table),
        })

    def settle(self, table: str, run_id: str, partition: str | None, passed: bool) -> dict[str, object]:
        """Promote (every check passed) or discard (one failed) what ``run_id`` staged; metadata for the checks."""
        from envduels_dagster.core.training.publication import discard, promote

        root = self.snapshot_root()
        if not passed:
            discard(root, table, run_id, partition)
            return {"publication": f"not published (a check failed); readers keep the last passing snapshot "
                                   f"(staged rows of run {run_id} discarded)"}
        snap = promote(root, table, run_id, partition)
        if snap is None:
            return {"publication": f"nothing staged by run {run_id}: re-materialize to publish"}
        return {"publication": "published" if snap.written else "unchanged: the published snapshot kept",
                "published_run_id": snap.run_id, "published_data_version": snap.data_version,
                "published_snapshot": dg.MetadataValue.path(str(snap.path))}

    def load_input(self, context: dg.InputContext):
        from envduels_dagster.core.training.publication import read_snapshot

        table = context.asset_key.path[-1]
        partitions = list(context.asset_partition_keys) if context.has_asset_partitions else None
        return read_snapshot(self.snapshot_root(), table, partitions)
