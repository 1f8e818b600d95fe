"""Authoring progress across co-evolution rounds: does an author's hardened child beat its parent?

Why a module of its own: the table pairs every child with its parent by lineage and
gives the paired change a t interval over lineage pairs; that is analysis, testable on plain frames, and the
``authoring_progress`` asset only reads, calls :func:`progress_table`, writes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from envduels_dagster.core.authoring.coevolution import env_scores
from envduels_dagster.core.stats import (
    percentile_interval,
    rowwise_spearman,
    spearman,
    spearman_with_permutation,
    stratified_cluster_weights,
)

COLUMNS = ["author", "round", "n_pairs", "solver_skill", "design_before", "design_after", "design_change",
           "design_change_lower", "design_change_upper", "hint_before", "hint_after", "hint_change",
           "hint_change_lower", "hint_change_upper", "design_change_reason", "hint_change_reason"]


def paired_change(deltas: np.ndarray, bounds: tuple[float, float]) -> tuple[float, float, float, str | None]:
    """Mean parent -> child change over lineage pairs with a t interval (``core.stats.mean_interval``: at least
    ``MIN_ENVS`` pairs and some spread, else NULL with the reason). Was a percentile bootstrap over the pairs,
    which covered like the author score's bootstrap does with 3-12 environments (0.67-0.90)."""
    from envduels_dagster.core.stats.intervals import mean_interval

    ci = mean_interval(deltas, bounds=bounds)
    return ci.estimate, ci.lower, ci.upper, ci.reason


def progress_table(envs: pd.DataFrame, episodes: pd.DataFrame) -> pd.DataFrame:
    """Per author and round r >= 1: parent -> child change in design and hint score, paired by lineage."""
    scores = env_scores(episodes).set_index("env_id")
    round0 = episodes[(episodes["round"] == 0) & (episodes["author"] != episodes["solver"])
                      & (episodes["condition"] == "cold") & (episodes["status"] != "incomplete")]
    skill = round0.assign(y=(round0["status"] == "success").astype(float)).groupby("solver")["y"].mean()
    children = envs[(envs["round"] > 0) & envs["valid"] & envs["parent_env_id"].notna()]
    rows = []
    for (author, round_), grp in children.groupby(["author", "round"]):
        pairs = [(p, c) for p, c in zip(grp["parent_env_id"], grp["env_id"]) if p in scores.index and c in scores.index]
        before = scores.loc[[p for p, _ in pairs]] if pairs else scores.iloc[0:0]
        after = scores.loc[[c for _, c in pairs]] if pairs else scores.iloc[0:0]
        d_design = paired_change(after["design"].to_numpy() - before["design"].to_numpy(), (-1.0, 1.0))
        d_hint = paired_change(after["hint"].to_numpy() - before["hint"].to_numpy(), (-2.0, 2.0))
        rows.append({"author": author, "round": int(round_), "n_pairs": len(pairs),
                     "solver_skill": float(skill.get(author, np.nan)),
                     "design_before": float(before["design"].mean()), "design_after": float(after["design"].mean()),
                     "design_change": d_design[0], "design_change_lower": d_design[1],
                     "design_change_upper": d_design[2],
                     "hint_before": float(before["hint"].mean()), "hint_after": float(after["hint"].mean()),
                     "hint_change": d_hint[0], "hint_change_lower": d_hint[1], "hint_change_upper": d_hint[2],
                     "design_change_reason": d_design[3], "hint_change_reason": d_hint[3]})
    return pd.DataFrame(rows, columns=COLUMNS)


def skill_vs_change(progress: pd.DataFrame, round_: int = 1) -> dict[str, float]:
    """Spearman rho and permutation p between solver skill and the design / hint change in ``round_``."""
    r = progress[progress["round"] == round_]
    rho_d, p_d = spearman_with_permutation(r["solver_skill"].to_numpy(), r["design_change"].to_numpy())
    rho_h, p_h = spearman_with_permutation(r["solver_skill"].to_numpy(), r["hint_change"].to_numpy())
    return {"skill_vs_design_change_rho": rho_d, "skill_vs_design_change_p": p_d,
            "skill_vs_hint_change_rho": rho_h, "skill_vs_hint_change_p": p_h}


# ---------------------------------------------------------------- an interval for skill -> improvement (issue 16)
MIN_AUTHORS = 4  # authors with a skill and a change below which the skill-improvement interval is withheld
MIN_PAIRS = 12  # lineage pairs (and round-0 environments) of every author below which it is withheld (measured)
MIN_RELIABILITY = 0.85  # share of the authors' spread that is not noise, below which it is withheld (see reliability)


def reliability(points: np.ndarray, replicates: np.ndarray) -> float:
    """1 - (mean bootstrap variance of each author's figure) / (variance of the figures across authors).

    Why: rho is computed from estimated skills and changes; when their noise is a large part of their spread
    across authors, rho is pulled towards 0 (attenuation) and a percentile interval is centred on the pulled
    value, so it misses the population rho (measured, docs/STATISTICS.md). 1 = no noise, <= 0 = all noise."""
    points = np.asarray(points, float)
    spread = float(np.var(points, ddof=1)) if points.size >= 2 else float("nan")
    with np.errstate(invalid="ignore"):
        noise = float(np.nanmean(np.nanvar(replicates, axis=0, ddof=1)))
    return 1.0 - noise / spread if spread > 0 else float("nan")


def _interval_reason(n_authors: int, min_pairs: int, n_envs: int) -> str | None:
    """Why the skill-improvement interval is withheld (None when it is published)."""
    if n_authors < MIN_AUTHORS:
        return (f"insufficient data: {n_authors} author{'s' * (n_authors != 1)} with a solver skill and a change "
                f"(the interval needs at least {MIN_AUTHORS})")
    if min_pairs < MIN_PAIRS:
        return (f"insufficient data: an author has {min_pairs} lineage pair{'s' * (min_pairs != 1)} "
                f"(the interval needs at least {MIN_PAIRS} per author)")
    if n_envs < MIN_PAIRS:
        return (f"insufficient data: a solver's skill rests on {n_envs} round-0 environment{'s' * (n_envs != 1)} "
                f"of an author (the interval needs at least {MIN_PAIRS})")
    return None


def _skill_replicates(episodes: pd.DataFrame, solvers: list[str], n_boot: int, seed: int
                      ) -> tuple[np.ndarray, int]:
    """(n_boot, S) round-0 cold success of each solver over bootstrap replicates of the round-0 environments
    (resampled within each author, all solvers together, as role_rho's replicates), and the fewest
    round-0 environments any author contributes to the solvers' skill."""
    r0 = episodes[(episodes["round"] == 0) & (episodes["author"] != episodes["solver"])
                  & (episodes["condition"] == "cold") & (episodes["status"] != "incomplete")]
    r0 = r0.assign(y=(r0["status"] == "success").astype(float))
    agg = r0.groupby(["env_id", "solver"])["y"].agg(["sum", "count"]).unstack("solver")
    env_ids = agg.index.to_numpy()
    authors = r0.drop_duplicates("env_id").set_index("env_id").loc[env_ids, "author"].to_numpy()
    succ = agg["sum"].reindex(columns=solvers).fillna(0.0).to_numpy()  # (E, S)
    cnt = agg["count"].reindex(columns=solvers).fillna(0.0).to_numpy()
    w = stratified_cluster_weights(authors, n_boot, seed)  # (n_boot, E)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = (w @ succ) / (w @ cnt)
    fewest = int(pd.Series(authors).value_counts().min()) if len(authors) else 0
    return boot, fewest


def _change_replicates(deltas: list[np.ndarray], n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, A) mean change of each author over its lineage pairs resampled with replacement."""
    rng = np.random.default_rng(seed)
    out = np.full((n_boot, len(deltas)), np.nan)
    for j, d in enumerate(deltas):
        if d.size:
            out[:, j] = d[rng.integers(0, d.size, size=(n_boot, d.size))].mean(axis=1)
    return out


def skill_change_interval(envs: pd.DataFrame, episodes: pd.DataFrame, progress: pd.DataFrame | None = None,
                          round_: int = 1, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05
                          ) -> dict[str, float | int | str | None]:
    """Percentile intervals of the skill -> design / hint change rho of ``skill_vs_change``, with its sizes.

    Each replicate resamples the round-0 environments within each author (every solver's skill recomputed
    from its cold episodes on the drawn ones) and, independently, each author's round-``round_`` lineage
    pairs; rho is recomputed over the authors. Withheld (NaN bounds, ``skill_vs_change_reason``) below
    ``MIN_AUTHORS`` authors or ``MIN_PAIRS`` pairs (or round-0 environments) per author. ``progress`` is
    ``progress_table(envs, episodes)`` when the caller has it already."""
    progress = progress_table(envs, episodes) if progress is None else progress
    rows = progress[(progress["round"] == round_) & progress["solver_skill"].notna() & (progress["n_pairs"] > 0)]
    authors = rows["author"].tolist()
    scores = env_scores(episodes).set_index("env_id")
    children = envs[(envs["round"] == round_) & envs["valid"] & envs["parent_env_id"].notna()]
    deltas: dict[str, list[np.ndarray]] = {"design": [], "hint": []}
    for a in authors:
        grp = children[children["author"] == a]
        pairs = [(p, c) for p, c in zip(grp["parent_env_id"], grp["env_id"]) if p in scores.index and c in scores.index]
        for k in deltas:
            deltas[k].append(scores.loc[[c for _, c in pairs], k].to_numpy(float)
                             - scores.loc[[p for p, _ in pairs], k].to_numpy(float))
    skill_boot, fewest_envs = _skill_replicates(episodes, authors, n_boot, seed) if authors else (None, 0)
    min_pairs = int(rows["n_pairs"].min()) if len(rows) else 0
    reason = _interval_reason(len(authors), min_pairs, fewest_envs)
    out: dict[str, float | int | str | None] = {}
    for k in ("design", "hint"):
        lo = hi = float("nan")
        rho = spearman(rows["solver_skill"].to_numpy(float), rows[f"{k}_change"].to_numpy(float)) \
            if len(rows) >= 3 else float("nan")
        why = reason if reason or not np.isnan(rho) else "no rank correlation: skill or change is constant"
        rel = float("nan")
        if why is None:
            change_boot = _change_replicates(deltas[k], n_boot, seed + 1)
            rel = min(reliability(rows["solver_skill"].to_numpy(float), skill_boot),
                      reliability(rows[f"{k}_change"].to_numpy(float), change_boot))
            if not rel >= MIN_RELIABILITY:
                why = (f"insufficient data: noise is {1 - rel:.0%} of the authors' spread in skill or {k} change "
                       f"(reliability {rel:.2f}; the interval needs at least {MIN_RELIABILITY}: rho is pulled "
                       f"towards 0 and an interval around it misses)")
            else:
                rb = rowwise_spearman(skill_boot, change_boot)
                low, high = percentile_interval(np.array([rho]), rb[:, None], alpha)
                lo, hi = float(low[0]), float(high[0])
        out[f"skill_vs_{k}_change_lower"], out[f"skill_vs_{k}_change_upper"] = lo, hi
        out[f"skill_vs_{k}_change_reliability"], out[f"skill_vs_{k}_change_reason"] = rel, why
    out.update({"skill_vs_change_n_authors": len(authors), "skill_vs_change_n_pairs": int(rows["n_pairs"].sum()),
                "skill_vs_change_min_pairs": min_pairs, "skill_vs_change_min_envs": fewest_envs,
                "skill_vs_change_n_boot": n_boot})
    return out
