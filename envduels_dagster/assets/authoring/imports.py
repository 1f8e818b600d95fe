"""Import partitions of ``authored_environments``: ``import:<name>`` is materialized from a staged export.

Why the same asset: imported environments then are authored environments in every respect Dagster
and the warehouse know of (the asset's history, its checks, ``duel_episodes`` upstream, the
request sensor's pairs, the marts), and the write goes through the warehouse resource inside a run,
so it serializes with other writers like any run. ``envduels import DIR`` validates the export,
stages a copy (``core/authoring/imports.py``) and runs ``import_job`` for the partition; re-materializing the
partition from the UI re-reads the staged copy. docs/DECISIONS.md, "Imports are an author partition".
"""

import asyncio

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.authoring.writes import write_environments
from envduels_dagster.assets.shared import utcnow
from envduels_dagster.resources import SandboxResource


class AuthoringConfig(dg.Config):
    """Run config of ``authored_environments``; only import partitions read it."""

    export_dir: str = ""  # an import partition's export; empty: its staged copy, $ENVDUELS_HOME/imports/<name>/latest


def materialize_import(context: dg.AssetExecutionContext, config: AuthoringConfig, sandbox: SandboxResource,
                       warehouse: DuckDBResource) -> dg.MaterializeResult:
    """Load the import's export, validate every environment in the sandbox, replace the partition's rows."""
    from pathlib import Path

    from envduels_dagster.core.authoring.imports import (
        ImportInputError,
        content_digest,
        import_name,
        namespaced,
        staged_export,
    )
    from envduels_dagster.core.authoring.validation import validate_environment
    from envduels_dagster.core.storage.warehouse import environments_frame
    from envduels_dagster.core.training.format import ExportFormatError, load_export
    from envduels_dagster.settings.locations import envduels_home

    partition = context.partition_key
    export_dir = Path(config.export_dir) if config.export_dir else staged_export(envduels_home(), import_name(partition))
    try:
        specs = namespaced(load_export(export_dir), partition)
    except (ExportFormatError, ImportInputError) as exc:
        raise dg.Failure(f"import {partition!r}: {exc}; nothing was written") from None
    limits = sandbox.limits()

    async def validate_all():
        checked = []
        for i, spec in enumerate(specs, 1):
            checked.append(await validate_environment(spec, limits))
            verdict = "valid" if checked[-1].valid else f"rejected ({checked[-1].reject_reason})"
            context.log.info(f"[{i}/{len(specs)}] {partition}: {spec.env_id}: {verdict}")
        return checked

    checked = asyncio.run(validate_all())
    version = content_digest(checked)
    df = environments_frame(checked, version, utcnow())
    return write_environments(
        warehouse, df, partition, version, export_dir=dg.MetadataValue.path(str(export_dir.resolve())), model_calls=0,
        # what `envduels import` prints, in manifest order (the CLI need not open the warehouse after the run)
        verdicts=dg.MetadataValue.json([{"env_id": c.env_id, "valid": c.valid, "reason": c.reject_reason}
                                        for c in checked]))
