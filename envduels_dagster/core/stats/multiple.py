"""Multiple-comparison control for families of decisions (duels, the lift grid, convergence pairs).

Why: the product decides many things at once: 10 duels for 5 models, 435 for 30. Each one decided
at 5% means 5% of the null ones come out decided, and a family of hundreds will always show some
"findings". Holm controls the family-wise error rate under any dependence between the tests.
Benjamini-Hochberg controls the false-discovery rate (``scipy.stats.false_discovery_control``)
and assumes independence or positive dependence. The output names the method it used.
"""

from __future__ import annotations

import numpy as np

HOLM = "holm (family-wise 5%)"
BH = "benjamini-hochberg (false discovery rate 5%)"


def holm(p_values) -> np.ndarray:
    """Holm step-down adjusted p-values (NaN stays NaN and does not count towards the family size)."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    q = p[ok]
    if q.size == 0:
        return out
    order = np.argsort(q, kind="stable")
    scaled = (q.size - np.arange(q.size)) * q[order]
    adjusted = np.minimum(np.maximum.accumulate(scaled), 1.0)
    res = np.empty(q.size)
    res[order] = adjusted
    out[ok] = res
    return out


def benjamini_hochberg(p_values) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values); NaN stays NaN."""
    from scipy.stats import false_discovery_control

    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        out[ok] = false_discovery_control(p[ok], method="bh")
    return out


def welch_p_value(diff, se, df) -> np.ndarray:
    """Two-sided p-value of a Welch t statistic diff/se with df degrees of freedom, floored like the SQL
    mirror (NaN where se or df is missing or se is 0)."""
    from scipy.stats import t

    diff, se, df = (np.asarray(x, dtype=float) for x in (diff, se, df))
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = (se > 0) & (df >= 1)
        stat = np.where(ok, np.abs(diff) / np.where(ok, se, 1.0), np.nan)
        return np.where(ok, 2 * t.sf(stat, np.floor(np.where(ok, df, 1.0))), np.nan)


ADJUST = {"holm": (HOLM, holm), "bh": (BH, benjamini_hochberg)}
LIFT_TEST_COLUMNS = ["author", "solver", "is_self_pair", "n_envs", "lift", "t_stat", "p_value", "p_adjusted",
                     "decided", "method"]


def lift_grid_tests(stats, method: str = "holm", alpha: float = 0.05, min_envs: int | None = None):
    """The family of lift decisions "lift > 0" of one round's author x solver grid, with multiple-comparison control.

    ``stats``: rows of ``env_solver_stats`` (one round: author, solver, env_id, lift). Per pair, a one-sided
    Student t test over the author's environments (each environment one value, as the published interval
    ``lift_ci_*``): t = mean / (sd / sqrt(n)), p = P(T_{n-1} >= t). No p-value (NaN, not in the family, never
    decided) below ``min_envs`` environments or when the environments do not vary, as the interval. The family
    is the peer pairs (self pairs get a p-value but are not decisions of the grid); ``p_adjusted`` is Holm's
    (any dependence: pairs share authors and solvers) or Benjamini-Hochberg's, named in ``method``.
    """
    import pandas as pd
    from scipy.stats import t

    from envduels_dagster.core.stats.intervals import _ZERO, MIN_ENVS

    label, adjust = ADJUST[method]
    min_envs = MIN_ENVS if min_envs is None else min_envs
    rows = []
    for (author, solver), g in stats.groupby(["author", "solver"], sort=True):
        v = g["lift"].to_numpy(dtype=float)
        v = v[~np.isnan(v)]
        stat, p = float("nan"), float("nan")
        if v.size >= min_envs:
            se = float(v.std(ddof=1)) / np.sqrt(v.size)
            if se >= _ZERO:
                stat = float(v.mean()) / se
                p = float(t.sf(stat, v.size - 1))
        rows.append({"author": author, "solver": solver, "is_self_pair": author == solver, "n_envs": int(v.size),
                     "lift": float(v.mean()) if v.size else float("nan"), "t_stat": stat, "p_value": p})
    out = pd.DataFrame(rows, columns=LIFT_TEST_COLUMNS[:-3])
    out["p_adjusted"] = np.nan
    peer = ~out["is_self_pair"].to_numpy(dtype=bool)
    if peer.any():
        out.loc[peer, "p_adjusted"] = adjust(out.loc[peer, "p_value"].to_numpy(dtype=float))
    out["decided"] = (out["p_adjusted"] <= alpha) & peer
    out["method"] = label
    return out
