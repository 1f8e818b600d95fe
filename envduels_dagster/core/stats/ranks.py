"""Rank statistics: average ranks, Spearman and Kendall correlations, permutation p-values.

Why here and exact where possible: role separation (solver rank vs author rank), skill vs
improvement and lift vs learning all correlate a handful of models, where a Monte-Carlo
p-value is noisy and a normal approximation is wrong; with up to 8 items every ordering is
enumerated. ``rank_desc`` is vectorised over bootstrap replicates (one row per replicate).
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np


def rank_desc(scores: np.ndarray) -> np.ndarray:
    """Ranks along the last axis, 1 = highest score, ties share their average rank, NaN stays NaN."""
    scores = np.asarray(scores, dtype=float)
    flat = np.atleast_2d(np.where(np.isnan(scores), -np.inf, scores))
    rows, n = flat.shape
    if n == 0:
        return scores.copy()
    order = np.argsort(-flat, axis=-1, kind="stable")
    ordered = np.take_along_axis(-flat, order, axis=-1)
    with np.errstate(invalid="ignore"):  # inf - inf between missing scores: they are masked below
        new_run = np.concatenate([np.ones((rows, 1), bool), np.diff(ordered, axis=-1) != 0], axis=-1)
    run = np.cumsum(new_run, axis=-1) - 1 + (np.arange(rows) * n)[:, None]
    positions = np.broadcast_to(np.arange(1, n + 1, dtype=float), (rows, n))
    sums = np.bincount(run.ravel(), weights=positions.ravel(), minlength=rows * n)
    counts = np.bincount(run.ravel(), minlength=rows * n)
    ranks = np.empty_like(flat)
    np.put_along_axis(ranks, order, (sums[run] / counts[run]), axis=-1)
    ranks = ranks.reshape(scores.shape)
    return np.where(np.isnan(scores), np.nan, ranks)


def spearman(x, y) -> float:
    """Spearman's rho (Pearson correlation of average ranks); NaN when fewer than 2 items or a constant side."""
    rx, ry = rank_desc(np.asarray(x, float)), rank_desc(np.asarray(y, float))
    if rx.size < 2 or np.std(rx) == 0 or np.std(ry) == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def rowwise_spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row of x with the same row of y (NaN where a row is constant)."""
    rx, ry = rank_desc(x), rank_desc(y)
    rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
    denom = np.sqrt((rx ** 2).sum(axis=1) * (ry ** 2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (rx * ry).sum(axis=1) / np.where(denom > 0, denom, 1), np.nan)


def kendall_tau(x, y) -> float:
    """Kendall's tau-b (``scipy.stats.kendalltau``); NaN when either side is constant."""
    from scipy.stats import kendalltau

    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.size < 2:
        return float("nan")
    with warnings.catch_warnings():  # a constant input warns and gives NaN, the intended answer
        warnings.simplefilter("ignore")
        return float(kendalltau(x, y).statistic)


def permutation_pvalue(x, y, n_perm: int = 10000, seed: int = 0, exact_up_to: int = 8) -> tuple[float, int]:
    """Two-sided p-value of Spearman's rho against permutations of y: (p, number of permutations used).

    Exact (all n! orderings) up to ``exact_up_to`` items, else ``n_perm`` random permutations with the
    observed ordering counted once ((1 + hits) / (1 + n_perm))."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = x.size
    observed = spearman(x, y)
    if n < 3 or math.isnan(observed):
        return float("nan"), 0
    rx, ry = rank_desc(x), rank_desc(y)
    rx = (rx - rx.mean()) / np.linalg.norm(rx - rx.mean())
    ryc = ry - ry.mean()
    ryc = ryc / np.linalg.norm(ryc)
    if n <= exact_up_to:
        perms = np.array(list(itertools.permutations(range(n))))
        rhos = ryc[perms] @ rx
        return float(np.mean(np.abs(rhos) >= abs(observed) - 1e-12)), len(perms)
    rng = np.random.default_rng(seed)
    perms = np.argsort(rng.random((n_perm, n)), axis=1)
    rhos = ryc[perms] @ rx
    return float((1 + np.sum(np.abs(rhos) >= abs(observed) - 1e-12)) / (1 + n_perm)), n_perm


def spearman_with_permutation(x, y, n_perm: int = 5000, seed: int = 0) -> tuple[float, float]:
    """(rho, two-sided permutation p) over the items where both x and y are defined; NaNs below 3 items."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = ~(np.isnan(x) | np.isnan(y))
    x, y = x[ok], y[ok]
    if x.size < 3:
        return float("nan"), float("nan")
    p, _ = permutation_pvalue(x, y, n_perm=n_perm, seed=seed)
    return spearman(x, y), p


def stratified_permutation_pvalue(x, y, strata, n_perm: int = 5000, seed: int = 0) -> tuple[float, float, int]:
    """(rho, two-sided p, permutations) of the pooled Spearman rho, permuting y only *within* each stratum.

    Why: in the lift -> learning study every learner contributes one row per author, and learners differ
    in how much they gain at all; shuffling gains across learners would compare a strong learner's row
    with a weak one's and make the null too wide or too narrow. Within-learner shuffles keep each
    learner's gains together. Rows also share authors, which this shuffle ignores: the lift -> learning study
    now publishes ``core.stats.crossed`` (both crossings) and keeps this p beside it for comparison."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    strata = np.asarray(strata, dtype=object)
    observed = spearman(x, y)
    if x.size < 3 or math.isnan(observed):
        return observed, float("nan"), 0
    rx, ry = rank_desc(x), rank_desc(y)
    rx = (rx - rx.mean()) / np.linalg.norm(rx - rx.mean())
    ryc = (ry - ry.mean()) / np.linalg.norm(ry - ry.mean())
    rng = np.random.default_rng(seed)
    perms = np.tile(np.arange(x.size), (n_perm, 1))
    for s in sorted(set(strata), key=str):
        idx = np.flatnonzero(strata == s)
        perms[:, idx] = idx[np.argsort(rng.random((n_perm, idx.size)), axis=1)]
    rhos = ryc[perms] @ rx
    return observed, float((1 + np.sum(np.abs(rhos) >= abs(observed) - 1e-12)) / (1 + n_perm)), n_perm
