"""Which rankings intervals are published: the sizes at which each was measured calibrated, and the rules that
NULL an interval below them with a reason column (docs/STATISTICS.md "Rankings", docs/DECISIONS.md "Which rankings
intervals are published"). Pure pandas/numpy; ``core.rankings.leaderboard.compute_rankings`` applies them."""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Environments per author below which the bootstrap score intervals (``<score>_lower/_upper``) are withheld:
#: they covered 0.85 / 0.89 / 0.93 / 0.97 (solver score) and 0.67 / 0.87 / 0.90 / 0.98 (author score), 0.72 /
#: 0.85 / 0.84 / 0.94 (corrected design score) at 3 / 6 / 12 / 30 (docs/STATISTICS.md). The t intervals
#: (``<score>_ci_*``) are the calibrated ones below that.
BOOT_MIN_ENVS = 30
#: ... and the rank intervals (same replicates): solver rank 0.89 / 0.95 / 0.98 / 0.99, author rank 0.93 / 0.99 /
#: 0.99 / 1.00 at 3 / 6 / 12 / 30 (160 intervals a size, docs/STATISTICS.md).
RANK_MIN_ENVS = 6
BOOTSTRAP_SCORES = ("solver_score", "solver_hinted", "author_score", "design_score", "design_score_corrected")
#: Environments by an author below which its corrected design score's t interval (``design_score_corrected_ci_*``)
#: is withheld (since 2 Dec 2026). Its per-environment values are mostly seed noise, right-skewed (skewness
#: ~1.6, 19 distinct values at 3 peers x 4 seeds) and their spread grows with their mean, so the t interval misses
#: above: coverage 0.92 at 10-12 environments (4 seeds) and 0.905-0.92 at 3-12 (8 seeds), >= 0.93 from 24-30
#: (docs/STATISTICS.md, "Rankings"). Hall's skewness-corrected t and the bootstrap-t did no better (0.91-0.92 at
#: 10-12). Solver and author score t intervals are calibrated from 3 and keep no such minimum.
DESIGN_T_MIN_ENVS = 30
T_MIN_ENVS = {"design_score_corrected": DESIGN_T_MIN_ENVS}  # t interval -> fewest environments by its author



def withhold_uncalibrated_bootstrap(df: pd.DataFrame, n_min: int) -> None:
    """NULL the bootstrap intervals below the sizes at which they were measured calibrated, each with a
    ``<figure>_interval_reason`` (added columns); ``design_score`` (uncorrected, biased by seed noise) always."""
    few = f"insufficient data: an author has {n_min} environment{'s' * (n_min != 1)}"
    rules = []  # (estimate column = bounds prefix, reason column, reason or None, reason where no estimate)
    for fig in BOOTSTRAP_SCORES:
        t = f"; the t interval {fig}_ci_lower/upper is the calibrated one" if f"{fig}_ci_lower" in df else ""
        if fig in T_MIN_ENVS and n_min < T_MIN_ENVS[fig]:
            t = f"; so does the t interval {fig}_ci_lower/upper" if f"{fig}_ci_lower" in df else ""
        reason = (("biased by seed noise (its interval covered 0.00-0.21 of its noise-free value): see "
                   "design_score_corrected and design_score_corrected_ci_lower/upper (published from "
                   f"{DESIGN_T_MIN_ENVS} environments per author)") if fig == "design_score" else
                  f"{few} (the bootstrap interval needs at least {BOOT_MIN_ENVS} per author to reach nominal "
                  f"coverage{t})" if n_min < BOOT_MIN_ENVS else None)
        rules.append((fig, f"{fig}_interval_reason", reason, "no estimate"))
    for key in ("solver", "author"):
        reason = (f"{few} (the rank interval needs at least {RANK_MIN_ENVS} per author to reach nominal coverage)"
                  if n_min < RANK_MIN_ENVS else None)
        rules.append((f"{key}_rank", f"{key}_rank_interval_reason", reason, "no rank"))
    for est, reason_col, reason, missing in rules:
        if f"{est}_lower" not in df:
            continue
        if reason:
            df[[f"{est}_lower", f"{est}_upper"]] = np.nan
        df[reason_col] = [missing if pd.isna(x) else reason for x in df[est]]


def withhold_uncalibrated_t(df: pd.DataFrame, authored: dict[str, int]) -> None:
    """NULL the t intervals of ``T_MIN_ENVS`` for authors with fewer environments (``authored``: model -> its
    environments), with a ``<score>_ci_reason``; an interval already withheld keeps its own reason."""
    for fig, n_min in T_MIN_ENVS.items():
        lo, hi, why = f"{fig}_ci_lower", f"{fig}_ci_upper", f"{fig}_ci_reason"
        if lo not in df:
            continue
        n = df["model"].map(lambda m: authored.get(m, 0))
        cut = df[lo].notna() & (n < n_min)
        df.loc[cut, [lo, hi]] = np.nan
        df[why] = df[why].astype(object)
        df.loc[cut, why] = [f"not calibrated: the author has {k} environment{'s' * (k != 1)} (this t interval needs "
                            f"at least {n_min} to reach nominal coverage: its per-environment values are skewed by "
                            "seed noise)" for k in n[cut]]
