"""The duel tournament of the rankings, with intervals from the environment level up (issue 16).

Why re-decide the duels: a duel is a Welch t decision on two samples of environments (dbt ``duels``). The
old Bradley-Terry interval resampled the 10 duel rows as if they were independent draws, so it ignored how
close each decision was. Here every environment-bootstrap replicate (each author's environments resampled
with replacement: the same weights as the solver and author scores) recomputes both sides' mean lift of every
pair, re-decides every duel with the mart's rule, rebuilds the tournament, refits Bradley-Terry and recounts
the triads. Percentile intervals come from those replicates. A replicate is the mart's SQL run on a resampled
warehouse: a resampled environment counts as many times as it was drawn (its n, mean and variance too).

Point estimate and replicates share the code: the point tournament is the mart's decisions, and this module's
rule at weights 1 must reproduce them exactly; when it does not (a hand-made duels table, another rule), no
interval is published and the reason says so. Decisions are per duel at the 5% level with no multiplicity
control, as in the mart (named in ``tournament_decision_control``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from envduels_dagster.core.rankings.panel import Panel
from envduels_dagster.core.stats.bootstrap import ALPHA, quiet_nan
from envduels_dagster.core.stats.intervals import MIN_ENVS
from envduels_dagster.core.stats.ranks import rank_desc
from envduels_dagster.core.stats.tournament_batch import (
    bradley_terry_batch,
    separated,
    triads_batch,
    wins_from_score,
)

#: Environments per author below which the tournament intervals (BT, zeta, triads) are withheld.
TOURNAMENT_MIN_ENVS = MIN_ENVS
#: ... and below which the zeta and cyclic-triad intervals are: with fewer, most duels are ties, zeta is pulled
#: towards its all-ties value and its interval covered the population tournament's zeta 0.00 / 0.42 of the time
#: at 3 / 6 environments per author (0.92 at 12, 1.00 at 30; docs/STATISTICS.md), a spurious intransitivity.
ZETA_MIN_ENVS = 12
ESTIMAND = ("the tournament as this design decides it (n environments per author, each duel at 5%): what a "
            "replication at the same scale would give, not the infinite-environment strengths")
DECISION_CONTROL = "none: each duel decided at its own 5% level (Welch t over environments, as the duels mart)"
METHOD = "environment bootstrap stratified by author; every duel re-decided per replicate; percentile"
_ZERO = 1e-12  # the mart's "no spread" threshold on the standard error


def decide_duels(lift: np.ndarray, env_authors: np.ndarray, solvers: list[str], models: list[str],
                 weights: np.ndarray, alpha: float = ALPHA, min_n: int = MIN_ENVS) -> dict[str, np.ndarray]:
    """The duels mart's rule on R weighted copies of the environments (weights (R, E) multiplicities).

    ``lift`` (E, S) per environment x solver (NaN: no result). The duel of i and j compares the lift i's
    environments give solver j with the lift j's environments give solver i. Returns (R, M, M) arrays:
    ``score`` (points of i against j: 1 won, 0.5 tie, 0 lost; NaN where not played), ``played``, ``diff``
    (lift_i - lift_j), ``se``, ``df``, ``n`` (environments of i's side)."""
    from scipy.stats import t as student_t

    m = len(models)
    col = [solvers.index(x) if x in solvers else -1 for x in models]
    x = np.where(np.array(col)[None, :] >= 0, lift[:, np.maximum(col, 0)], np.nan) if m else np.zeros((len(lift), 0))
    author_of = np.array([models.index(a) if a in models else -1 for a in env_authors], dtype=int)
    onehot = (author_of[:, None] == np.arange(m)[None, :]).astype(float)
    defined = ~np.isnan(x)
    ref = np.zeros((m, m))  # centre each (author, solver) sample on one of its values: no spread stays exactly 0
    for a in range(m):
        for s in range(m):
            vals = x[(author_of == a) & defined[:, s], s]
            ref[a, s] = vals[0] if vals.size else 0.0
    xc = np.where(defined, x - np.where(author_of[:, None] >= 0, ref[np.maximum(author_of, 0)], 0.0), 0.0)
    kernel = onehot[:, :, None] * defined[:, None, :]
    w = np.asarray(weights, dtype=float)
    n = (w @ kernel.reshape(len(x), -1)).reshape(-1, m, m)  # [r, author, solver]
    s1 = (w @ (kernel * xc[:, None, :]).reshape(len(x), -1)).reshape(-1, m, m)
    s2 = (w @ (kernel * (xc ** 2)[:, None, :]).reshape(len(x), -1)).reshape(-1, m, m)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = ref[None] + s1 / n
        var = np.where(n > 1, np.maximum(s2 - s1 * s1 / n, 0.0) / (n - 1), 0.0)
        q = np.where(n > 0, var / n, np.nan)
        n_t, q_t = np.swapaxes(n, 1, 2), np.swapaxes(q, 1, 2)
        diff = mean - np.swapaxes(mean, 1, 2)
        se = np.sqrt(q + q_t)
        den = np.where(n > 1, q * q / (n - 1), 0.0) + np.where(n_t > 1, q_t * q_t / (n_t - 1), 0.0)
        df = np.where(den > 0, (q + q_t) ** 2 / np.where(den > 0, den, 1.0), np.nan)
    floor_df = np.floor(df)
    crit = np.full(df.shape, np.nan)
    ok_df = floor_df >= 1
    crit[ok_df] = student_t.ppf(1 - alpha / 2, floor_df[ok_df])
    played = (n > 0) & (n_t > 0) & ~np.eye(m, dtype=bool)[None]
    sufficient = played & (np.minimum(n, n_t) >= min_n) & (se >= _ZERO) & ok_df
    with np.errstate(invalid="ignore"):
        won = sufficient & (diff - crit * se > 0)
        lost = sufficient & (diff + crit * se < 0)
    score = np.where(played, np.where(won, 1.0, np.where(lost, 0.0, 0.5)), np.nan)
    return {"score": score, "played": played, "diff": diff, "se": se, "df": df, "n": n}


def duels_from_stats(stats: pd.DataFrame, alpha: float = ALPHA) -> pd.DataFrame:
    """The duels mart recomputed from ``env_solver_stats`` rows (one round): model_a < model_b, lift_diff,
    outcome, score_a, n_envs_a/b, lift_diff_se, diff_df. For tests and benchmarks without dbt."""
    stats = stats[~stats["is_self_pair"].astype(bool)] if "is_self_pair" in stats else stats
    envs = stats.groupby("env_id", sort=True)["author"].first()
    solvers = sorted(stats["solver"].unique())
    lift = stats.pivot_table(index="env_id", columns="solver", values="lift", aggfunc="first")
    lift = lift.reindex(index=envs.index, columns=solvers).to_numpy(dtype=float)
    models = sorted(set(envs) & set(solvers))
    d = decide_duels(lift, envs.to_numpy(dtype=object), solvers, models, np.ones((1, len(envs))), alpha)
    rows = []
    for i, a in enumerate(models):
        for j in range(i + 1, len(models)):
            if d["played"][0, i, j]:
                score = float(d["score"][0, i, j])
                rows.append({"model_a": a, "model_b": models[j], "lift_diff": d["diff"][0, i, j],
                             "outcome": {1.0: "a", 0.0: "b"}.get(score, "tie"), "score_a": score,
                             "n_envs_a": int(d["n"][0, i, j]), "n_envs_b": int(d["n"][0, j, i]),
                             "lift_diff_se": d["se"][0, i, j], "diff_df": d["df"][0, i, j]})
    cols = ["model_a", "model_b", "lift_diff", "outcome", "score_a", "n_envs_a", "n_envs_b", "lift_diff_se", "diff_df"]
    return pd.DataFrame(rows, columns=cols)


def _interval(replicates: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Plain percentile interval over axis 0 (NaN replicates dropped; not widened to hold the estimate)."""
    with np.errstate(invalid="ignore"), quiet_nan():
        return np.nanquantile(replicates, alpha / 2, axis=0), np.nanquantile(replicates, 1 - alpha / 2, axis=0)


def _mart_tournament(duels: pd.DataFrame, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    k = len(names)
    score, played = np.full((k, k), np.nan), np.zeros((k, k), dtype=bool)
    pos = {m: i for i, m in enumerate(names)}
    for a, b, s in duels[["model_a", "model_b", "score_a"]].itertuples(index=False):
        i, j = pos[a], pos[b]
        score[i, j], score[j, i] = float(s), 1.0 - float(s)
        played[i, j] = played[j, i] = True
    return score, played


def duel_models(duels: pd.DataFrame) -> list[str]:
    """The models of the duel tournament: every model in a duel row, sorted."""
    return sorted(set(duels.get("model_a", [])) | set(duels.get("model_b", []))) if len(duels) else []


def tournament_columns(panel: Panel, duels: pd.DataFrame, models: list[str], weights: np.ndarray, prior: float,
                       alpha: float = ALPHA, min_envs: int = TOURNAMENT_MIN_ENVS) -> tuple[dict, dict]:
    """Per-model Bradley-Terry columns (aligned with ``models``) and the tournament's summary figures, from the
    ``panel``'s lift per environment x solver."""
    lift, env_authors, solvers = panel.lift, panel.authors, panel.solvers
    names = duel_models(duels)
    k, n_boot = len(names), int(weights.shape[0])
    cols: dict[str, Any] = {c: np.full(len(models), np.nan)
                            for c in ("bt_strength", "bt_strength_lower", "bt_strength_upper")}
    summary: dict[str, Any] = {
        "kendall_zeta": np.nan, "kendall_zeta_lower": np.nan, "kendall_zeta_upper": np.nan,
        "cyclic_triads": 0.0, "cyclic_triads_lower": np.nan, "cyclic_triads_upper": np.nan,
        "cyclic_triads_max": 0.0, "tournament_complete": True, "n_triads": 0, "n_triads_complete": 0,
        "bt_converged": None, "bt_iterations": 0, "bt_separated": None, "bt_boot_converged": np.nan,
        "tournament_n_boot": 0, "kendall_zeta_n_boot": 0, "tournament_min_envs_per_author": 0}
    reason = None
    counts = [int(np.sum(env_authors == m)) for m in names]
    summary["tournament_min_envs_per_author"] = min(counts) if counts else 0
    if k < 2:
        reason = "insufficient data: fewer than 2 models in duels"
    score, played = _mart_tournament(duels, names) if k else (np.zeros((0, 0)), np.zeros((0, 0), bool))
    fit = bradley_terry_batch(wins_from_score(score, played)[None], prior)
    tri = triads_batch(score[None], played[None])
    complete = bool(played[~np.eye(k, dtype=bool)].all()) if k else True
    summary.update(cyclic_triads=float(tri.cyclic[0]), cyclic_triads_max=tri.c_max, kendall_zeta=float(tri.zeta[0]),
                   tournament_complete=complete, n_triads=tri.n_triads, n_triads_complete=int(tri.n_complete[0]))
    if k >= 2:
        summary.update(bt_converged=bool(fit.converged[0]), bt_iterations=int(fit.iterations[0]),
                       bt_separated=bool(separated(wins_from_score(score, played)[None])[0]))
    if reason is None and summary["tournament_min_envs_per_author"] < min_envs:
        n_min = summary["tournament_min_envs_per_author"]
        reason = (f"insufficient data: an author has {n_min} environment{'s' * (n_min != 1)} (the tournament "
                  f"intervals need at least {min_envs} per author)")
    if reason is None:
        point = decide_duels(lift, env_authors, solvers, names, np.ones((1, weights.shape[1])), alpha)
        same = (point["played"][0] == played) & (~played | (point["score"][0] == np.nan_to_num(score)))
        if not same.all():
            reason = (f"the duels table disagrees with env_solver_stats on {int((~same).sum() // 2)} duel(s): "
                      "no environment-level interval")
    idx = [models.index(m) for m in names]
    if k >= 2:
        cols["bt_strength"][idx] = fit.theta[0]
    if reason is None:
        boot = decide_duels(lift, env_authors, solvers, names, weights, alpha)
        bt = bradley_terry_batch(wins_from_score(boot["score"], boot["played"]), prior)
        lo, hi = _interval(bt.theta, alpha)
        cols["bt_strength_lower"][idx], cols["bt_strength_upper"][idx] = lo, hi
        rank_lo, rank_hi = _interval(rank_desc(bt.theta), alpha)
        cols["bt_rank_lower"], cols["bt_rank_upper"] = np.full(len(models), np.nan), np.full(len(models), np.nan)
        cols["bt_rank_lower"][idx], cols["bt_rank_upper"][idx] = rank_lo, rank_hi
        tb = triads_batch(boot["score"], boot["played"])
        if summary["tournament_min_envs_per_author"] >= ZETA_MIN_ENVS:
            if complete:
                summary["kendall_zeta_lower"], summary["kendall_zeta_upper"] = map(float, _interval(tb.zeta, alpha))
            summary["cyclic_triads_lower"], summary["cyclic_triads_upper"] = map(float, _interval(tb.cyclic, alpha))
        summary["bt_boot_converged"] = float(bt.converged.mean())
        summary["tournament_n_boot"] = n_boot
        summary["kendall_zeta_n_boot"] = int(np.sum(~np.isnan(tb.zeta)))
    n_min = summary["tournament_min_envs_per_author"]
    few = (f"insufficient data: an author has {n_min} environment{'s' * (n_min != 1)} (the zeta and triad "
           f"intervals need at least {ZETA_MIN_ENVS} per author: with fewer, most duels are ties and zeta is "
           "pulled towards its all-ties value)")
    zeta_reason = reason or (few if n_min < ZETA_MIN_ENVS else None) or (
        None if complete else "incomplete tournament: Kendall's zeta needs every duel (triads count complete triples)")
    summary["bt_interval_reason"], summary["kendall_zeta_reason"] = reason, zeta_reason
    summary["cyclic_triads_reason"] = reason or (few if n_min < ZETA_MIN_ENVS else None)
    cols.setdefault("bt_rank_lower", np.full(len(models), np.nan))
    cols.setdefault("bt_rank_upper", np.full(len(models), np.nan))
    cols["bt_strength_reason"] = [(reason if m in names else "not in any duel") for m in models]
    summary["tournament_interval_method"] = METHOD
    summary["tournament_interval_estimand"] = ESTIMAND
    summary["tournament_decision_control"] = DECISION_CONTROL
    return cols, summary
