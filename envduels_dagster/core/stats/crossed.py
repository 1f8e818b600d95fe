"""A permutation test of association in a crossed design: rows share a learner *and* an author.

Why: the lift -> learning study has one row per (learner, author). Learners differ in how much they gain
at all, authors in how much their environments teach any learner, and both can differ in lift too. Shuffling
gains within each learner (``ranks.stratified_permutation_pvalue``) keeps the learner effect but treats the
rows of one author as independent: an author whose environments happen to have a high lift *and* teach
well then reads as an association, and with four or five authors that happens often (measured: a
false-positive rate of 0.2-0.4 at 5% when both effects are planted, docs/STATISTICS.md).

The test here asks whether lift and gain are associated *beyond* the learner and author main effects.
Statistic: the partial rank correlation, i.e. the Pearson correlation of the pooled ranks of lift and of
gain after each is residualised on learner and author indicators (least squares over the observed cells,
so a missing cell, such as a learner's own environments, costs nothing). Null: Freedman and Lane's (1983)
permutation of the reduced model's residuals: the gain ranks' residuals are shuffled across rows, added back
to their learner + author fit, residualised again and correlated with lift's residuals; p = (1 + hits) /
(1 + permutations), two-sided. The residuals are only approximately exchangeable (they are correlated
through the fit), which is why the false-positive rate is measured rather than assumed.
"""

from __future__ import annotations

import numpy as np

from envduels_dagster.core.stats.ranks import rank_desc

METHOD = "Freedman-Lane permutation of the rank residuals after learner and author main effects"
MIN_RESIDUAL_DF = 3  # rows minus fitted learner and author effects below which no p is given


def _design(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Intercept, learner and author indicators (first level of each dropped)."""
    parts = [np.ones((rows.size, 1))]
    for labels in (rows, cols):
        levels = sorted(set(labels), key=str)
        parts.append(np.stack([labels == lv for lv in levels[1:]], axis=1).astype(float)
                     if len(levels) > 1 else np.zeros((rows.size, 0)))
    return np.concatenate(parts, axis=1)


def crossed_permutation_pvalue(x, y, rows, cols, n_perm: int = 5000, seed: int = 0
                               ) -> tuple[float, float, int, str | None]:
    """(partial rank correlation, two-sided p, permutations, reason) of x and y beyond row and column effects.

    ``reason`` says why the p is withheld (NaN) when the rows leave fewer than ``MIN_RESIDUAL_DF`` residual
    degrees of freedom after the fit, or either side has no residual variation."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    rows, cols = np.asarray(rows, dtype=object), np.asarray(cols, dtype=object)
    design = _design(rows, cols)
    rank = int(np.linalg.matrix_rank(design)) if x.size else 0
    if x.size - rank < MIN_RESIDUAL_DF:
        return (float("nan"), float("nan"), 0,
                f"insufficient data: {x.size} rows leave {x.size - rank} residual degrees of freedom after the "
                f"learner and author effects (the test needs at least {MIN_RESIDUAL_DF})")
    q, _ = np.linalg.qr(design)
    q = q[:, :rank]

    def resid(v):
        return v - q @ (q.T @ v)

    rx, ry = resid(rank_desc(x)), resid(rank_desc(y))
    nx, ny = np.linalg.norm(rx), np.linalg.norm(ry)
    if nx < 1e-9 or ny < 1e-9:
        return float("nan"), float("nan"), 0, "no residual variation in lift or gain after the main effects"
    observed = float(rx @ ry / (nx * ny))
    rng = np.random.default_rng(seed)
    perms = np.argsort(rng.random((n_perm, x.size)), axis=1)
    shuffled = ry[perms].T  # (n, n_perm): the fit added back is removed again by resid, so only P r matters
    shuffled = shuffled - q @ (q.T @ shuffled)
    stats = (rx @ shuffled) / (nx * np.linalg.norm(shuffled, axis=0))
    p = float((1 + np.sum(np.abs(stats) >= abs(observed) - 1e-12)) / (1 + n_perm))
    return observed, p, n_perm, None
