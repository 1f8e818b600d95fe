"""``training_export``: publish a learner's training set for RL trainers, versioned and atomic."""

import asyncio

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.api import exports_root
from envduels_dagster.assets.common import AFTER_PAIRS, OWNERS, utcnow
from envduels_dagster.assets.training import training_set
from envduels_dagster.core.sandbox import SandboxedEnv, SandboxLimits
from envduels_dagster.core.training_export import ExportItem, write_export
from envduels_dagster.core.warehouse import read_table
from envduels_dagster.partitions import solver_partitions
from envduels_dagster.resources import SandboxResource


async def first_observations(source: str, class_name: str, max_turns: int, seeds: list[int],
                             limits: SandboxLimits) -> dict[int, str]:
    """The cold first observation of each seed, for prompt-style trainer rows (run in the sandbox)."""
    async with SandboxedEnv(source, class_name, max_turns, limits) as env:
        return {seed: (await env.reset(seed))[0] for seed in seeds}


@dg.asset(
    partitions_def=solver_partitions, deps=[training_set], group_name="training",
    kinds={"python", "parquet"}, owners=OWNERS, tags={"layer": "product"}, automation_condition=AFTER_PAIRS,
    description="The learner's training set as files: $ENVDUELS_HOME/exports/<learner>/<version>/ with an "
                "EnvDuels v1 export, train.jsonl (multi-turn gym rows) and train.parquet (prompt rows); "
                "`latest` switches atomically to the newest complete version.",
)
def training_export(context: dg.AssetExecutionContext, sandbox: SandboxResource,
                    warehouse: DuckDBResource) -> dg.MaterializeResult:
    learner = context.partition_key
    with warehouse.get_connection() as conn:
        rows = read_table(conn, "training_set", {"learner": learner})
        envs = read_table(conn, "environments").set_index("env_id")
    limits = sandbox.limits()
    items = []
    for row in rows.sort_values("rank").itertuples(index=False):
        env = envs.loc[row.env_id]
        seeds = [int(s) for s in row.benchmark_seeds]
        observations = asyncio.run(first_observations(env["source"], row.class_name, int(row.max_turns), seeds,
                                                      limits))
        items.append(ExportItem(
            env_id=row.env_id, author=row.author, domain=row.domain, class_name=row.class_name,
            max_turns=int(row.max_turns), source=env["source"], source_sha256=row.source_sha256, hint=row.hint,
            seeds=seeds, observations=observations, p_cold=float(row.p_cold), p_hint=float(row.p_hint),
            lift=float(row.lift), lift_lower=float(row.lift_lower), lift_upper=float(row.lift_upper)))
    version = f"{utcnow():%Y%m%dT%H%M%S}-{context.run.run_id[:8]}"
    path = write_export(exports_root() / learner, learner, items, version)
    context.log.info(f"published {len(items)} environments for {learner} at {path}")
    return dg.MaterializeResult(metadata={
        "path": dg.MetadataValue.path(str(path)),
        "latest": dg.MetadataValue.path(str(path.parent / "latest")),
        "version": version,
        "environments": len(items),
        "rows": sum(len(i.seeds) for i in items),
    })
