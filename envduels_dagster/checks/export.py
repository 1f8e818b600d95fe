"""BLOCKING checks on ``training_export``: the published files are exactly the training set.

File integrity, not a table, so no great-expectations suite here: the published
``latest`` export must verify against its SHA256SUMS and the data contract, and
its manifest must list exactly the learner's ``training_set`` environments.
"""

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.api import exports_root
from envduels_dagster.assets.export import training_export
from envduels_dagster.checks.common import partition_keys, spec
from envduels_dagster.core.training_export import ExportIntegrityError, verify_export
from envduels_dagster.core.warehouse import read_table

ASSET = training_export.key


@dg.multi_asset_check(
    specs=[spec("files_match_hashes", ASSET, "Every file of the latest export matches SHA256SUMS and the contract.",
                blocking=True, partitions_def=training_export.partitions_def),
           spec("matches_training_set", ASSET, "The export lists exactly the learner's training_set environments, "
                "each with its source hash.", blocking=True, partitions_def=training_export.partitions_def)],
    name="training_export_checks",
    description="BLOCKING integrity checks of the published export under $ENVDUELS_HOME/exports/<learner>/latest.",
)
def training_export_checks(context: dg.AssetCheckExecutionContext, warehouse: DuckDBResource):
    learner = partition_keys(context)["key"]
    root = exports_root() / learner / "latest"
    try:
        manifest = verify_export(root.resolve())
    except (ExportIntegrityError, OSError, ValueError) as exc:
        message = f"{root}: {exc}"
        for name in ("files_match_hashes", "matches_training_set"):
            yield dg.AssetCheckResult(asset_key=ASSET, check_name=name, passed=False,
                                      metadata={"error": dg.MetadataValue.text(message[:1000])})
        return
    yield dg.AssetCheckResult(asset_key=ASSET, check_name="files_match_hashes", passed=True,
                              metadata={"path": dg.MetadataValue.path(str(root.resolve())),
                                        "environments": len(manifest.environments)})
    with warehouse.get_connection() as conn:
        rows = read_table(conn, "training_set", {"learner": learner})
    expected = dict(zip(rows["env_id"], rows["source_sha256"]))
    published = {e.id: e.source_sha256 for e in manifest.environments}
    missing, extra = sorted(set(expected) - set(published)), sorted(set(published) - set(expected))
    changed = sorted(k for k in set(expected) & set(published) if expected[k] != published[k])
    problems = [f"{label}: {', '.join(ids[:5])}" for label, ids in
                (("missing from the export", missing), ("not in training_set", extra), ("hash differs", changed))
                if ids]
    yield dg.AssetCheckResult(asset_key=ASSET, check_name="matches_training_set", passed=not problems,
                              metadata={"problems": dg.MetadataValue.text("; ".join(problems) or "none"),
                                        "environments": len(published)})
