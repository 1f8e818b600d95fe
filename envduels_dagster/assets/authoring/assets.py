"""``authored_environments``: each author writes K environments, each validated in the sandbox.

Why partitioned by author: adding a model authors only its own partition, and a version
bump re-authors only that model. Rejected environments are kept with their reason, so
they count against the author's validity rate instead of vanishing.
"""

import asyncio

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.authoring.imports import AuthoringConfig, materialize_import
from envduels_dagster.assets.authoring.writes import write_environments
from envduels_dagster.assets.registry.assets import model_registry
from envduels_dagster.assets.registry.partitions import models_partitions
from envduels_dagster.assets.shared import OWNERS, documented_schema, utcnow
from envduels_dagster.resources import DuelSettings, GatewayResource, SandboxResource


@dg.asset(
    partitions_def=models_partitions, deps=[model_registry], group_name="duel",
    kinds={"python", "duckdb"}, owners=OWNERS, tags={"layer": "core"}, code_version="1",
    metadata={"dagster/column_schema": documented_schema("environments")},
    description="Environments written by one author (partition = author), validated in the sandbox. "
                "Rejected environments are kept with their reason (table `environments`). A partition "
                "`import:<name>` holds an imported EnvDuels export instead (`envduels import`).",
)
def authored_environments(context: dg.AssetExecutionContext, config: AuthoringConfig, gateway: GatewayResource,
                          sandbox: SandboxResource, settings: DuelSettings,
                          warehouse: DuckDBResource) -> dg.MaterializeResult:
    from envduels_dagster.core.authoring.duplicates import is_duplicate
    from envduels_dagster.core.authoring.imports import is_import
    from envduels_dagster.core.authoring.plan import AuthoringPlanError
    from envduels_dagster.core.authoring.prompts import author_environments
    from envduels_dagster.core.models import LLMError, run_and_close
    from envduels_dagster.core.models.registry import RegistryError
    from envduels_dagster.core.storage.warehouse import environments_frame

    author = context.partition_key
    if is_import(author):  # an imported export, not a model (core/authoring/imports.py)
        return materialize_import(context, config, sandbox, warehouse)
    try:
        plan = settings.authoring_plan()
    except AuthoringPlanError as exc:
        raise dg.Failure(f"authoring settings cannot be used, nothing was written: {exc}") from None
    registry = gateway.registry()
    entry = registry.get(author)
    if not entry.authors:  # a partition left from before its roles changed, materialized by hand
        raise dg.Failure(f"model {author!r} has roles {list(entry.roles)} in {registry.path}: it writes no "
                         "environments; nothing was written. Give it the author role to author.")
    gw = gateway.gateway(registry)

    def progress(done: int, total: int, spec) -> None:
        verdict = "valid" if spec.valid else f"rejected ({spec.reject_reason})"
        context.log.info(f"[{done}/{total}] {author} wrote {spec.env_id}: {verdict}")

    try:
        specs = asyncio.run(run_and_close(gw, author_environments(
            gw, author, settings.envs_per_author, list(settings.benchmark_seeds), sandbox.limits(),
            on_progress=progress, plan=plan)))
    except (LLMError, RegistryError) as exc:
        raise dg.Failure(f"author {author!r} could not be called, nothing was written: {exc}") from None
    df = environments_frame(specs, entry.version, utcnow())
    return write_environments(warehouse, df, author, entry.version,
                              model_calls=sum(gw.stats.backend_calls.values()),
                              duplicates=sum(is_duplicate(s.reject_reason) for s in specs),
                              cache_hits=sum(gw.stats.cache_hits.values()))
