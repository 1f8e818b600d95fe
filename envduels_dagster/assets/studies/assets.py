"""``lift_learning``: does hint lift predict the gain from training? (simulated learners).

Why an asset of its own area: it is a study over the product, not part of it; it reads the
training sets and the marts and writes one table. The design lives in ``core/studies/lift.py``.
"""

import asyncio

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.shared import (
    OWNERS,
    documented_schema,
    markdown_table,
    rounded_metadata,
    table_metadata,
    table_version,
)
from envduels_dagster.resources import DuelSettings, GatewayResource, SandboxResource


@dg.asset(
    deps=["training_set", "pair_lift"], group_name="training", kinds={"python", "duckdb"}, owners=OWNERS,
    tags={"layer": "study"}, code_version="2", metadata={"dagster/column_schema": documented_schema("lift_learning")},
    description="Lift -> learning study: for each simulated learner and author, train the learner on that author's "
                "environments (settings.study_train_on: all valid ones, or only its training set), then compare cold success on the author's held-out environments before and "
                "after; correlate the gain with the author's hint lift on the learner (Spearman; permutation p "
                "of the association beyond learner and author effects, Freedman-Lane).",
)
def lift_learning(context: dg.AssetExecutionContext, gateway: GatewayResource, sandbox: SandboxResource,
                  settings: DuelSettings, warehouse: DuckDBResource) -> dg.MaterializeResult:
    from envduels_dagster.core.models import run_and_close
    from envduels_dagster.core.models.capabilities import trainers
    from envduels_dagster.core.storage.warehouse import read_table, replace_rows
    from envduels_dagster.core.studies.learning import correlation_summary
    from envduels_dagster.core.studies.lift import StudyConfig, StudyTables, run_study

    registry = gateway.registry()
    # learners are the models with the solver role whose provider can train them (the simulated); the
    # held-out environments come from the author-role models
    learners, skipped = trainers([m for m in registry.models if m.solves])
    with warehouse.get_connection() as conn:
        envs = read_table(conn, "environments", {"round": 0})
        training = read_table(conn, "training_set")  # used when study_train_on == "training_set"
        lift = read_table(conn, "pair_lift", {"round": 0})  # per round: the round-0 environments' lift
    gw = gateway.gateway(registry)
    config = StudyConfig(tuple(registry.authors), settings.study_heldout_envs, tuple(settings.benchmark_seeds),
                         settings.study_train_on, sandbox.limits())
    df = asyncio.run(run_and_close(gw, run_study(
        gw, learners, StudyTables(envs, training, lift), config,
        on_learner=lambda learner: context.log.info(f"lift->learning: studied {learner}"))))
    with warehouse.get_connection() as conn:
        replace_rows(conn, "lift_learning", df)
    return dg.MaterializeResult(data_version=table_version(warehouse, "lift_learning"), metadata=rounded_metadata({
        **table_metadata(warehouse, "lift_learning"),
        "num_rows": len(df),
        **correlation_summary(df),
        "not_studied (no training backend for real models)": ", ".join(skipped) or "none",
        "rows": dg.MetadataValue.md(markdown_table(df)),
    }))
