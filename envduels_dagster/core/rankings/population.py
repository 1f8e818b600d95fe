"""Bounds on the infinite-environment tournament: Bradley-Terry strengths, ranks, zeta and triads (issue 16).

Why a second set of intervals: the bootstrap intervals of ``rankings_tournament`` are for the tournament *as
this design decides it* (most duels are ties with few environments), and they covered the strengths of the
tournament every duel would have with infinitely many environments ("population": each duel decided by the
sign of its population lift difference) only 0.02 / 0.19 / 0.44 / 0.87 of the time at 3 / 6 / 12 / 30
environments per author (docs/STATISTICS.md). That is the tournament a user asks about.

Method: a projection of a simultaneous confidence set for the duels' signs.

1. Every duel's Welch interval (the duels mart's statistic: mean lift i's environments give j minus mean lift
   j's environments give i, over environments; df floored; >= ``MIN_ENVS`` a side) is taken at level
   1 - alpha/K, K = the number of pairs (Bonferroni). With probability >= 1 - alpha all K intervals hold their
   population differences at once, so every duel whose interval excludes 0 has the population's sign.
2. Every other pair (not excluded from 0, too few environments, no spread, or never played) is undetermined:
   its population result may be a win, a tie (a difference of exactly 0) or a loss.
3. All 3^u completions of the u undetermined pairs are enumerated; each is a complete tournament, fitted with
   the same Bradley-Terry (same prior) and counted for triads. The population tournament is one of them when
   the event in 1 holds, so the [min, max] of each figure over the completions contains its population value
   with probability >= 1 - alpha. The bounds are conservative (often wide) and exact given the event; they are
   not widened to hold any estimate. The mart's own tournament is one completion (its decisions at 5% agree in
   sign with every decision at alpha/K), so the point estimates lie inside: a property, checked as data.

Withheld (NULL with ``population_interval_reason``) when fewer than 2 models duel or when 3^u exceeds
``MAX_PATTERNS`` (more than 11 undetermined pairs: e.g. 6 models with 4 or fewer of 15 duels decided).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from envduels_dagster.core.rankings.panel import Panel
from envduels_dagster.core.stats.bootstrap import ALPHA
from envduels_dagster.core.stats.ranks import rank_desc
from envduels_dagster.core.stats.tournament_batch import bradley_terry_batch, triads_batch

#: 3^11 completions: ~2.5 s of batched Newton fits for 5 models on 2 cores.
MAX_PATTERNS = 3 ** 11
CHUNK = 20000
ESTIMAND = ("the infinite-environment tournament: every duel decided by the sign of its population lift "
            "difference, Bradley-Terry with the same prior")
METHOD = ("simultaneous sign set: each duel's Welch interval at alpha/K (Bonferroni over the K pairs), every "
          "undetermined pair completed as win, tie or loss; [min, max] over the completions")
_OUTCOMES = (0.0, 0.5, 1.0)


def decision_control(k_pairs: int, alpha: float = ALPHA) -> str:
    return (f"Bonferroni over the {k_pairs} pairs: each Welch interval at {alpha:g}/{k_pairs}, so every sign it "
            f"fixes is right together with probability >= {1 - alpha:g}")


def population_columns(panel: Panel, names: list[str], models: list[str], prior: float, alpha: float = ALPHA,
                       max_patterns: int = MAX_PATTERNS) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Per-model bounds (aligned with ``models``; NaN for models outside ``names``) and the summary's figures.

    ``panel``: its lift (E, S) per environment x solver and each environment's author; ``names`` the models of the
    tournament."""
    lift, env_authors, solvers = panel.lift, panel.authors, panel.solvers
    from envduels_dagster.core.rankings.tournament import decide_duels

    k = len(names)
    pairs = list(itertools.combinations(range(k), 2))
    cols = {c: np.full(len(models), np.nan) for c in ("bt_strength_population_lower", "bt_strength_population_upper",
                                                       "bt_rank_population_lower", "bt_rank_population_upper")}
    summary: dict[str, Any] = {
        "kendall_zeta_population_lower": np.nan, "kendall_zeta_population_upper": np.nan,
        "cyclic_triads_population_lower": np.nan, "cyclic_triads_population_upper": np.nan,
        "population_undecided_pairs": 0, "population_patterns": 0, "population_interval_reason": None,
        "population_decision_control": decision_control(len(pairs), alpha),
        "population_interval_estimand": ESTIMAND, "population_interval_method": METHOD}
    if k < 2:
        summary["population_interval_reason"] = "insufficient data: fewer than 2 models in duels"
        return cols, summary
    d = decide_duels(lift, env_authors, solvers, names, np.ones((1, len(env_authors))), alpha / len(pairs))
    fixed = d["score"][0]
    undecided = [p for p in pairs if not (d["played"][0][p] and fixed[p] in (0.0, 1.0))]
    u = len(undecided)
    summary["population_undecided_pairs"] = u
    if len(_OUTCOMES) ** u > max_patterns:
        summary["population_interval_reason"] = (
            f"too many undecided pairs: {u} of {len(pairs)} duels are not decided at the simultaneous level, "
            f"{len(_OUTCOMES)}^{u} completions exceed the cap of {max_patterns}")
        return cols, summary
    base = np.zeros((k, k))
    for i, j in pairs:
        if (i, j) not in undecided:
            base[i, j], base[j, i] = fixed[i, j], 1.0 - fixed[i, j]
    played = ~np.eye(k, dtype=bool)
    lo_t, hi_t = np.full(k, np.inf), np.full(k, -np.inf)
    lo_r, hi_r = np.full(k, np.inf), np.full(k, -np.inf)
    lo_z = lo_c = np.inf
    hi_z = hi_c = -np.inf
    completions = itertools.product(_OUTCOMES, repeat=u)
    n_done = 0
    while True:
        items = list(itertools.islice(completions, CHUNK))
        if not items:
            break
        chunk = np.array(items, dtype=float).reshape(len(items), u)
        score = np.broadcast_to(base, (len(chunk), k, k)).copy()
        for c, (i, j) in enumerate(undecided):
            score[:, i, j], score[:, j, i] = chunk[:, c], 1.0 - chunk[:, c]
        score[:, np.arange(k), np.arange(k)] = 0.0
        many = np.broadcast_to(played, score.shape)
        theta = bradley_terry_batch(score, prior).theta
        ranks = rank_desc(np.round(theta, 9))  # equal strengths (a symmetric completion) share their rank
        tri = triads_batch(score, many)
        lo_t, hi_t = np.minimum(lo_t, theta.min(0)), np.maximum(hi_t, theta.max(0))
        lo_r, hi_r = np.minimum(lo_r, ranks.min(0)), np.maximum(hi_r, ranks.max(0))
        lo_c, hi_c = min(lo_c, float(tri.cyclic.min())), max(hi_c, float(tri.cyclic.max()))
        if k >= 3:
            lo_z, hi_z = min(lo_z, float(tri.zeta.min())), max(hi_z, float(tri.zeta.max()))
        n_done += len(chunk)
    idx = [models.index(m) for m in names]
    cols["bt_strength_population_lower"][idx], cols["bt_strength_population_upper"][idx] = lo_t, hi_t
    cols["bt_rank_population_lower"][idx], cols["bt_rank_population_upper"][idx] = lo_r, hi_r
    summary.update(cyclic_triads_population_lower=lo_c, cyclic_triads_population_upper=hi_c, population_patterns=n_done)
    if k >= 3:
        summary.update(kendall_zeta_population_lower=lo_z, kendall_zeta_population_upper=hi_z)
    return cols, summary
