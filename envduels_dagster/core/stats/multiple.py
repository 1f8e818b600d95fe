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
