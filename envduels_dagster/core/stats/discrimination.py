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


def corrected_discrimination_rows(rates: np.ndarray, n_seeds: np.ndarray) -> np.ndarray:
    """(E,) seed-noise-corrected discrimination on the squared scale (NaN if fewer than 2 peers).

    Why: observed rates r_i = k_i/m_i scatter around the true p_i even when every peer is alike, so
    sum |r_i - r_j| is positive for identical peers (0.41 for four peers at p = 0.5 with 4 seeds). On the
    squared scale the noise can be removed exactly: E[(r_i - r_j)^2] = (p_i - p_j)^2 + V_i + V_j with
    V_i = p_i (1 - p_i) / m_i, estimated without bias by v_i = r_i (1 - r_i) / (m_i - 1). So
    [sum_{i<j} (r_i - r_j)^2 - (n - 1) sum_i v_i] / floor(n^2/4) is unbiased for
    sum_{i<j} (p_i - p_j)^2 / floor(n^2/4): 1 for a panel split 0/1, 0 for identical peers (it can be
    negative in one environment; its mean over environments is what is reported). Solvers with fewer than
    2 seeds are left out (their noise cannot be estimated)."""
    r = np.atleast_2d(np.asarray(rates, dtype=float))
    m = np.atleast_2d(np.asarray(n_seeds, dtype=float))
    use = ~np.isnan(r) & (m >= 2)
    r0 = np.where(use, r, 0.0)
    n = use.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        v = np.where(use, r0 * (1 - r0) / np.where(use, m - 1, 1), 0.0)
        squared = n * (r0 ** 2).sum(axis=1) - r0.sum(axis=1) ** 2
        return np.where(n >= 2, (squared - (n - 1) * v.sum(axis=1)) / np.maximum(n * n // 4, 1), np.nan)
