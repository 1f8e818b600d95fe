"""Peer-panel discrimination of an environment (DESIGN §6, the author design score).

Why the sorted identity: sum_{i<j} |r_i - r_j| = sum_k r_(k) (2k - n - 1) over the sorted
results, which vectorises over environments (one row each, NaN where a solver is not a
peer) and is the form the dbt model ``author_scores`` computes in SQL.
"""

from __future__ import annotations

import numpy as np


def discrimination_rows(results: np.ndarray) -> np.ndarray:
    """(E,) discrimination sum_{i<j} |r_i - r_j| / floor(n^2/4) of each row's non-NaN results (NaN if n < 2).

    NaNs sort last, so the k-th smallest of n results gets weight 2k - n - 1."""
    results = np.atleast_2d(np.asarray(results, dtype=float))
    r = np.sort(results, axis=1)
    n = (~np.isnan(results)).sum(axis=1)
    k = np.arange(1, r.shape[1] + 1)[None, :]
    weights = np.where(k <= n[:, None], 2 * k - n[:, None] - 1, 0)
    total = np.nansum(r * weights, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n >= 2, total / np.maximum(n * n // 4, 1), np.nan)


def discrimination(results) -> float:
    """Discrimination of one environment's peer results: 1 when the panel splits in half, 0 when unanimous."""
    return float(discrimination_rows(np.asarray(results, dtype=float)[None, :])[0])
