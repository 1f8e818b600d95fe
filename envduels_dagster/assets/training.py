"""``training_set``: per learner, the environments it fails cold but passes with the hint."""


import dagster as dg
import pandas as pd
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.common import AFTER_PAIRS, OWNERS, markdown_table
from envduels_dagster.assets.duels import duel_episodes
from envduels_dagster.core.stats import cluster_bootstrap_mean, env_solver_stats, matched_seeds, training_candidates
from envduels_dagster.core.warehouse import read_table, replace_rows
from envduels_dagster.partitions import by_solver, solver_partitions
from envduels_dagster.resources import DuelSettings


@dg.asset(
    partitions_def=solver_partitions,
    deps=[dg.AssetDep(duel_episodes,
                      partition_mapping=by_solver)],
    group_name="training", kinds={"python", "duckdb"}, owners=OWNERS, tags={"layer": "product"},
    automation_condition=AFTER_PAIRS,
    description="Training set for one learner (partition): environments it fails cold and passes hinted "
                "(configurable rule), ranked by lift, with provenance. Table `training_set`.",
)
def training_set(context: dg.AssetExecutionContext, settings: DuelSettings,
                 warehouse: DuckDBResource) -> dg.MaterializeResult:
    learner = context.partition_key
    with warehouse.get_connection() as conn:
        episodes = read_table(conn, "episodes", {"solver": learner})
        envs = read_table(conn, "environments")
    # Co-evolution: an environment with a valid hardened child is superseded; the newest valid
    # version of each lineage is the one that can enter the training set.
    superseded = set(envs.loc[envs["valid"] & envs["parent_env_id"].notna(), "parent_env_id"])
    stats = env_solver_stats(episodes[~episodes["env_id"].isin(superseded)])
    picked = training_candidates(stats, learner, settings.training_max_cold, settings.training_min_hint,
                                 settings.training_include_self_authored)
    matched = matched_seeds(episodes)
    rows = []
    for rank, row in enumerate(picked.itertuples(index=False), start=1):
        env = envs[envs["env_id"] == row.env_id].iloc[0]
        per_seed = matched[matched["env_id"] == row.env_id]
        lift, lo, hi = cluster_bootstrap_mean([(per_seed["y_hint"] - per_seed["y_cold"]).to_numpy()])
        rows.append({"learner": learner, "env_id": row.env_id, "author": row.author, "domain": env["domain"],
                     "class_name": env["class_name"], "max_turns": int(env["max_turns"]),
                     "source_sha256": env["source_sha256"], "hint": env["hint"],
                     "benchmark_seeds": [int(x) for x in env["benchmark_seeds"]], "n_seeds": int(row.n_seeds),
                     "p_cold": row.p_cold, "p_hint": row.p_hint, "lift": lift, "lift_lower": lo,
                     "lift_upper": hi, "rank": rank})
    df = pd.DataFrame(rows, columns=["learner", "env_id", "author", "domain", "class_name", "max_turns",
                                     "source_sha256", "hint", "benchmark_seeds", "n_seeds", "p_cold", "p_hint",
                                     "lift", "lift_lower", "lift_upper", "rank"])
    with warehouse.get_connection() as conn:
        replace_rows(conn, "training_set", df, {"learner": learner})
    mine = stats[(stats["solver"] == learner) & (stats["author"] != learner)]
    return dg.MaterializeResult(metadata={
        "num_rows": len(df),
        "categories": dg.MetadataValue.json(mine["category"].value_counts().to_dict()),
        "excluded": dg.MetadataValue.md(
            "noise: fails even with the hint; wasted: passes cold; plus learnable environments below the "
            f"hinted threshold ({settings.training_min_hint:.0%}) and, unless configured, its own environments."),
        "environments": dg.MetadataValue.md(markdown_table(df[["rank", "env_id", "author", "p_cold", "p_hint"]])),
    })
