"""``training_set`` [learner] and its published files ``training_export`` [learner].

Why two assets: the table is what the checks guard (blocking: a bad set stops the run, and its
snapshot stays staged: the checks publish it only when they pass); the export is what downstream
trainers read, and it is written only after those checks.
The rule and the rows come from ``core/training/training_set.py``; the rule itself from ``core.stats``.
"""

import asyncio
import warnings

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.duels.assets import duel_episodes
from envduels_dagster.assets.registry.partitions import by_solver, solver_partitions
from envduels_dagster.assets.shared import (
    AFTER_CHECKED_TRAINING_SET,
    OWNERS,
    contract_schema,
    display_table,
    documented_schema,
    table_metadata,
    utcnow,
)
from envduels_dagster.resources import DuelSettings, SandboxResource
from envduels_dagster.resources.io_managers import PUBLISHED_IO_MANAGER_KEY


@dg.asset(
    partitions_def=solver_partitions,
    deps=[dg.AssetDep(duel_episodes, partition_mapping=by_solver)],
    group_name="training", kinds={"python", "duckdb"}, owners=OWNERS, tags={"layer": "product"},
    io_manager_key=PUBLISHED_IO_MANAGER_KEY, code_version="3",
    metadata={"dagster/column_schema": documented_schema("training_set")},
    description="Training set for one learner (partition): environments whose posterior probability of being "
                "learnable (fails cold, passes hinted) reaches DuelSettings.training_admission_threshold (or the "
                "fixed rule), ranked by lift, with a lift interval (the fitted and the uniform prior's 95% "
                "posterior intervals united) and provenance. Table `training_set`; "
                "published as a read-only snapshot $ENVDUELS_HOME/published/training_set/<learner>.parquet once its "
                "blocking checks pass (staged until then; a failing set never replaces the last passing one; load "
                "it with `load_asset_value` or `envduels_dagster.consumer`). Its data version is a hash of the rows.",
)
def training_set(context: dg.AssetExecutionContext, settings: DuelSettings, warehouse: DuckDBResource):
    from envduels_dagster.core.storage.warehouse import read_table, replace_rows
    from envduels_dagster.core.training.publication import content_version
    from envduels_dagster.core.training.training_set import build_training_set

    learner = context.partition_key
    with warehouse.get_connection() as conn:
        envs = read_table(conn, "environments")  # (ensures the schema)
        # every learner's rows fit the prior of the rates; transcripts are not needed
        episodes = conn.execute("SELECT env_id, author, solver, round, condition, seed, status FROM episodes").df()
    rule = settings.training_rule()
    built = build_training_set(learner, episodes, envs, rule)
    df = built.rows
    with warehouse.get_connection() as conn:
        replace_rows(conn, "training_set", df, {"learner": learner})
        table = table_metadata(conn, "training_set", {"learner": learner})
    # The data version is the content: an unchanged set keeps its version and triggers nothing downstream.
    with warnings.catch_warnings():  # Output(data_version=...) is marked beta; it is the documented way
        warnings.simplefilter("ignore")
        return dg.Output(df, data_version=dg.DataVersion(content_version(df)), metadata={
            "num_rows": len(df),
            "admission": dg.MetadataValue.md(
                f"{rule.method}: P(true p_cold <= {rule.cold_ceiling:g} and true p_hint >= {rule.min_hint:g}) >= "
                f"{rule.threshold:g}" if rule.method == "probability" else
                f"rule: observed p_cold <= {rule.max_cold:g} and p_hint >= {rule.min_hint:g}"),
            "expected_false_admissions": float(round(built.expected_false_admissions, 3)),
            # the same sum at the smallest learnable-region prior mass the data allow (docs/STATISTICS.md)
            "expected_false_admissions_upper": float(round(built.false_admission_bound.upper, 3)),
            "prior_region_mass": dg.MetadataValue.md(
                f"fitted {built.false_admission_bound.region_mass_fit:.3f}; the data allow "
                f"{built.false_admission_bound.region_mass_low:.3g}-{built.false_admission_bound.region_mass_high:.3g}"),
            "candidates": built.considered,
            "prior_rows": built.prior_rows,
            "admission_note": built.note or "prior fitted on enough rows (calibration: docs/STATISTICS.md)",
            "rounds used": "each lineage's newest valid version, any round (a kept copy replaces its parent: "
                           "one environment counts once)",
            "categories": dg.MetadataValue.json(built.categories),
            "excluded": dg.MetadataValue.md(excluded_summary(built, len(df))),
            "environments": display_table(df.to_dict("records"), ENV_COLUMNS, "training_set"),
            "not_admitted": display_table(built.excluded.to_dict("records") if built.excluded is not None else [],
                                          EXCLUDED_COLUMNS, "training_set", descriptions=EXCLUDED_DOCS),
            # last (issue 43: the column descriptions came before what a reader opens the page for): the warehouse
            # table; the IO manager then gives the row count and schema of the staged snapshot (the same rows,
            # plus their provenance columns), which load_asset_value returns once the checks pass
            **table,
        })


ENV_COLUMNS = [("rank", "int"), ("env_id", "string"), ("author", "string"), ("n_seeds", "int"), ("p_cold", "float"),
               ("p_hint", "float"), ("lift", "float"), ("lift_lower", "float"), ("lift_upper", "float"),
               ("p_learnable", "float"), ("hint", "string")]
EXCLUDED_COLUMNS = [("env_id", "string"), ("author", "string"), ("category", "string"), ("n_seeds", "int"),
                    ("p_cold", "float"), ("p_hint", "float"), ("lift", "float"), ("p_learnable", "float"),
                    ("reason", "string")]
EXCLUDED_DOCS = {"category": "As observed on the matched seeds: learnable (fails cold, passes hinted), noise "
                             "(fails both) or wasted (passes cold at least once).",
                 "reason": "Why the environment is not in the training set."}


def excluded_summary(built, admitted: int) -> str:
    """Where the learner's candidates went: admitted, and every other one counted by its reason."""
    excluded = built.excluded
    lines = [f"{built.considered} candidate environments (other authors'): **{admitted} admitted**."]
    if excluded is not None and len(excluded):
        for reason, n in excluded.groupby("reason").size().sort_values(ascending=False).items():
            lines.append(f"* {int(n)} {reason}")
    lines.append("\nIts own environments are not candidates unless DuelSettings.training_include_self_authored.")
    return "\n".join(lines)


def _train_parquet_schema() -> dg.TableSchema:
    from envduels_dagster.core.training.contract import PromptRow

    return contract_schema(PromptRow)


@dg.asset(
    partitions_def=solver_partitions, deps=[training_set], group_name="training",
    kinds={"python", "parquet"}, owners=OWNERS, tags={"layer": "product"},
    automation_condition=AFTER_CHECKED_TRAINING_SET, code_version="1",
    metadata={"dagster/column_schema": _train_parquet_schema()},  # train.parquet's columns, from the export contract
    description="The learner's training set as files: $ENVDUELS_HOME/exports/<learner>/<version>/ with an "
                "EnvDuels v1 export, train.jsonl (multi-turn gym rows) and train.parquet (prompt rows); "
                "`latest` switches atomically, and only after the staged version passed its audit (files match "
                "SHA256SUMS and the contract, and list exactly the learner's training set): write-audit-publish.",
)
def training_export(context: dg.AssetExecutionContext, sandbox: SandboxResource,
                    warehouse: DuckDBResource) -> dg.MaterializeResult:
    from envduels_dagster.api import exports_root
    from envduels_dagster.core.storage.warehouse import read_table
    from envduels_dagster.core.training.export import write_export
    from envduels_dagster.core.training.training_set import export_items

    learner = context.partition_key
    with warehouse.get_connection() as conn:
        rows = read_table(conn, "training_set", {"learner": learner})
        envs = read_table(conn, "environments")
    items = asyncio.run(export_items(rows, envs, sandbox.limits()))
    version = f"{utcnow():%Y%m%dT%H%M%S}-{context.run.run_id[:8]}"
    expected = dict(zip(rows["env_id"], rows["source_sha256"]))
    path = write_export(exports_root() / learner, learner, items, version, expected=expected,
                        run_id=context.run.run_id)
    context.log.info(f"published {len(items)} environments for {learner} at {path}")
    return dg.MaterializeResult(metadata={
        "path": dg.MetadataValue.path(str(path)),
        "latest": dg.MetadataValue.path(str(path.parent / "latest")),
        "version": version,
        "environments": len(items),
        "rows": sum(len(i.seeds) for i in items),
    })
