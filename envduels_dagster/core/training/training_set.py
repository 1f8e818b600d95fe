"""Build one learner's training set from its episodes: the product's central table.

Why here and not in the asset: which environments a learner may train on (lineage
supersession, the training rule, per-environment lift intervals, provenance columns)
is domain logic that must be testable without Dagster, and the same function must
serve any caller (asset, notebook, CLI). The rule itself (learnable = fails cold,
passes hinted) is defined once, in ``core.stats``; this module only applies it.

Two admission methods (``TrainingRule.method``): ``probability`` (default) admits an environment when
the posterior probability that it is learnable for the learner (true p_cold <= ``cold_ceiling`` and
true p_hint >= ``min_hint``) reaches ``threshold``, under a joint prior of the two rates fitted on every
learner's peer rows of the warehouse (``core.stats.joint_admission``; measured in docs/STATISTICS.md);
``rule`` keeps the fixed rule on observed rates (p_cold <= ``max_cold``, p_hint >= ``min_hint``). Either
way each row carries an interval of its lift (``joint_admission.robust_lift_interval``: the union of the
central 95% posterior intervals under the fitted prior and under the uniform prior), never a zero-width one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from envduels_dagster.core.stats import admits
from envduels_dagster.core.stats import joint_admission as ja
from envduels_dagster.core.stats.learnable import learnable_rows, superseded_env_ids

COLUMNS = ["learner", "env_id", "author", "domain", "class_name", "max_turns", "source_sha256", "hint",
           "benchmark_seeds", "n_seeds", "p_cold", "p_hint", "lift", "lift_lower", "lift_upper", "rank",
           "p_learnable", "admission_method", "admission_threshold", "cold_ceiling", "prior_rows"]
METHODS = ("probability", "rule")
# superseded_env_ids moved to core.stats.learnable (issue 42) and stays importable from here
__all__ = ["COLUMNS", "EXCLUDED_COLUMNS", "METHODS", "TrainingRule", "TrainingSet", "build_training_set", "exclusion_reason",
           "export_items", "first_observations", "superseded_env_ids"]


@dataclass(frozen=True)
class TrainingRule:
    """Admission: ``method`` "probability" (P(learnable) >= ``threshold``, learnable meaning true p_cold <=
    ``cold_ceiling`` and true p_hint >= ``min_hint``) or "rule" (observed p_cold <= ``max_cold`` and observed
    p_hint >= ``min_hint``)."""

    max_cold: float = 0.0
    min_hint: float = 0.5
    include_self_authored: bool = False
    method: str = "probability"
    threshold: float = 0.5
    cold_ceiling: float = 0.25

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"TrainingRule.method {self.method!r}: expected one of {', '.join(METHODS)}")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"TrainingRule.threshold {self.threshold!r}: expected a probability in (0, 1]")


@dataclass(frozen=True)
class TrainingSet:
    rows: pd.DataFrame  # COLUMNS, ranked by lift
    categories: dict[str, int]  # learnable / noise / wasted counts over the learner's peer environments
    expected_false_admissions: float = float("nan")  # sum of 1 - p_learnable over the rows
    prior_rows: int = 0  # (environment, learner) rows the joint prior was fitted on
    considered: int = 0  # the learner's candidate environments (peer, unless self-authored are included)
    note: str = ""  # "insufficient data: ..." when the prior rests on too few rows
    # the expected false admissions at the least favourable learnable-region mass the data allow (an upper
    # figure; ``expected_false_admissions`` is conditional on the fitted prior): docs/STATISTICS.md
    false_admission_bound: ja.FalseAdmissionBound | None = None
    # the candidates not admitted, with why (EXCLUDED_COLUMNS): where "learnable: 12" beside 3 rows went
    excluded: pd.DataFrame | None = None


EXCLUDED_COLUMNS = ["env_id", "author", "category", "n_seeds", "p_cold", "p_hint", "lift", "p_learnable", "reason"]


def exclusion_reason(category: str, p_learnable: float, rule: TrainingRule) -> str:
    """Why a candidate environment is not in the learner's training set, in words."""
    if category == "wasted":
        return "wasted: passes cold at least once"
    if category == "noise":
        return "noise: fails even with the hint"
    if rule.method == "probability":
        return (f"learnable as observed, but P(learnable) {p_learnable:.2f} < admission threshold "
                f"{rule.threshold:g} (too few seeds to be sure)")
    return f"learnable as observed, but outside the rule (p_cold <= {rule.max_cold:g}, p_hint >= {rule.min_hint:g})"


def build_training_set(learner: str, episodes: pd.DataFrame, envs: pd.DataFrame,
                       rule: TrainingRule = TrainingRule()) -> TrainingSet:
    """The learner's training rows from the episodes and the environments table.

    ``episodes`` may hold every solver (any author, any round): the other learners' rows only fit the
    joint prior of the rates; the rows are the learner's."""
    # Why not the env_solver_stats mart: the mart counts committed seeds only and is per round, while the
    # adaptive sampler decided membership on every seed it played (sampling = 'adaptive' included), and a
    # lineage's newest valid version replaces its parents across rounds. The matched seeds are the same
    # definition either way (core/stats/matched_sql.py, run here on the frame; the mart runs the dbt macro).
    # P(learnable) comes from the one definition shared with author_value (core.stats.learnable)
    found = learnable_rows(episodes, envs, learner, rule.cold_ceiling, rule.min_hint)
    prior, peer, mine = found.prior, found.peer, found.rows
    if not rule.include_self_authored:
        mine = mine[mine["author"] != learner]
    mine = mine.reset_index(drop=True)
    cold, hint, n = ja.counts(mine)
    p_learn = mine["p_learnable"].to_numpy(dtype=float)
    lower, upper = ja.robust_lift_interval(prior, cold, hint, n)
    if rule.method == "probability":
        keep = p_learn >= rule.threshold - 1e-12
    else:
        keep = np.asarray(admits(mine["p_cold"].to_numpy(), mine["p_hint"].to_numpy(), rule.max_cold,
                                 rule.min_hint), dtype=bool)
    picked = mine.assign(lift_lower=lower, lift_upper=upper)[keep]
    picked = picked.sort_values(["lift", "p_learnable", "env_id"], ascending=[False, False, True])
    by_id = envs.drop_duplicates("env_id").set_index("env_id")
    rows = []
    for rank, row in enumerate(picked.itertuples(index=False), start=1):
        env = by_id.loc[row.env_id]
        rows.append({"learner": learner, "env_id": row.env_id, "author": row.author, "domain": env["domain"],
                     "class_name": env["class_name"], "max_turns": int(env["max_turns"]),
                     "source_sha256": env["source_sha256"], "hint": env["hint"],
                     "benchmark_seeds": [int(x) for x in env["benchmark_seeds"]], "n_seeds": int(row.n_seeds),
                     "p_cold": row.p_cold, "p_hint": row.p_hint, "lift": row.lift,
                     "lift_lower": float(row.lift_lower), "lift_upper": float(row.lift_upper), "rank": rank,
                     "p_learnable": float(row.p_learnable), "admission_method": rule.method,
                     "admission_threshold": rule.threshold if rule.method == "probability" else float("nan"),
                     "cold_ceiling": rule.cold_ceiling, "prior_rows": prior.n_rows})
    df = pd.DataFrame(rows, columns=COLUMNS)
    note = "" if prior.n_rows >= ja.MIN_ROWS else (
        f"insufficient data: the prior of the rates rests on {prior.n_rows} (environment, learner) rows "
        f"(calibrated from {ja.MIN_ROWS}); p_learnable leans on the uniform prior")
    categories = mine.loc[mine["author"] != learner, "category"].value_counts().to_dict()
    chosen = picked.reset_index(drop=True)
    bound = ja.false_admission_bound(prior, ja.counts(peer), ja.counts(chosen), rule.cold_ceiling, rule.min_hint)
    out = mine[~keep]
    out = out[out["author"] != learner].sort_values(["category", "p_learnable", "env_id"], ascending=[True, False, True])
    excluded = out.assign(reason=[exclusion_reason(c, p, rule) for c, p in zip(out["category"], out["p_learnable"])])
    return TrainingSet(df, categories, float((1.0 - df["p_learnable"]).sum()), prior.n_rows, len(mine), note,
                       bound, excluded[EXCLUDED_COLUMNS].reset_index(drop=True))


async def first_observations(source: str, class_name: str, max_turns: int, seeds: list[int],
                             limits) -> dict[int, str]:
    """The cold first observation of each seed, for prompt-style trainer rows (run in the sandbox)."""
    from envduels_dagster.core.sandbox import SandboxedEnv

    async with SandboxedEnv(source, class_name, max_turns, limits) as env:
        return {seed: (await env.reset(seed))[0] for seed in seeds}


async def export_items(rows: pd.DataFrame, envs: pd.DataFrame, limits) -> list:
    """The published form of a training set (``rows``: table ``training_set``), in rank order, with sources
    from ``envs`` (table ``environments``) and each seed's first observation."""
    from envduels_dagster.core.training.export import ExportItem

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
