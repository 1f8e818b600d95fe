"""Build one learner's training set from its episodes: the product's central table.

Why here and not in the asset: which environments a learner may train on (lineage
supersession, the training rule, per-environment lift intervals, provenance columns)
is domain logic that must be testable without Dagster, and the same function must
serve any caller (asset, notebook, CLI). The rule itself (learnable = fails cold,
passes hinted) is defined once, in ``core.stats``; this module only applies it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from envduels_dagster.core.stats import cluster_bootstrap_mean, env_solver_stats, matched_seeds, training_candidates

COLUMNS = ["learner", "env_id", "author", "domain", "class_name", "max_turns", "source_sha256", "hint",
           "benchmark_seeds", "n_seeds", "p_cold", "p_hint", "lift", "lift_lower", "lift_upper", "rank"]


@dataclass(frozen=True)
class TrainingRule:
    """Admission thresholds: fail at most ``max_cold`` cold, pass at least ``min_hint`` hinted."""

    max_cold: float = 0.0
    min_hint: float = 0.5
    include_self_authored: bool = False


@dataclass(frozen=True)
class TrainingSet:
    rows: pd.DataFrame  # COLUMNS, ranked by lift
    categories: dict[str, int]  # learnable / noise / wasted counts over the learner's peer environments


def superseded_env_ids(envs: pd.DataFrame) -> set[str]:
    """Environments with a valid hardened child: the newest valid version of each lineage replaces them."""
    return set(envs.loc[envs["valid"] & envs["parent_env_id"].notna(), "parent_env_id"])


def build_training_set(learner: str, episodes: pd.DataFrame, envs: pd.DataFrame,
                       rule: TrainingRule = TrainingRule()) -> TrainingSet:
    """The learner's training rows from its episodes (any author, any round) and the environments table."""
    stats = env_solver_stats(episodes[~episodes["env_id"].isin(superseded_env_ids(envs))])
    picked = training_candidates(stats, learner, rule.max_cold, rule.min_hint, rule.include_self_authored)
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
    mine = stats[(stats["solver"] == learner) & (stats["author"] != learner)]
    return TrainingSet(pd.DataFrame(rows, columns=COLUMNS), mine["category"].value_counts().to_dict())


async def first_observations(source: str, class_name: str, max_turns: int, seeds: list[int],
                             limits) -> dict[int, str]:
    """The cold first observation of each seed, for prompt-style trainer rows (run in the sandbox)."""
    from envduels_dagster.core.sandbox import SandboxedEnv

    async with SandboxedEnv(source, class_name, max_turns, limits) as env:
        return {seed: (await env.reset(seed))[0] for seed in seeds}


async def export_items(rows: pd.DataFrame, envs: pd.DataFrame, limits) -> list:
    """The published form of a training set (``rows``: table ``training_set``), in rank order, with sources
    from ``envs`` (table ``environments``) and each seed's first observation."""
    from envduels_dagster.core.training_export import ExportItem

    by_id = envs.set_index("env_id")
    items = []
    for row in rows.sort_values("rank").itertuples(index=False):
        env = by_id.loc[row.env_id]
        seeds = [int(s) for s in row.benchmark_seeds]
        observations = await first_observations(env["source"], row.class_name, int(row.max_turns), seeds, limits)
        items.append(ExportItem(
            env_id=row.env_id, author=row.author, domain=row.domain, class_name=row.class_name,
            max_turns=int(row.max_turns), source=env["source"], source_sha256=row.source_sha256, hint=row.hint,
            seeds=seeds, observations=observations, p_cold=float(row.p_cold), p_hint=float(row.p_hint),
            lift=float(row.lift), lift_lower=float(row.lift_lower), lift_upper=float(row.lift_upper)))
    return items
