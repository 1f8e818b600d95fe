"""Duel tournaments: Bradley-Terry strengths and transitivity (cyclic triads, Kendall's zeta).

Why these two: the duel matrix is a tournament, so the natural questions are "how strong is each model
given who beat whom" (Bradley-Terry, P(i beats j) = 1/(1+e^(theta_j-theta_i))) and "is the tournament an
order at all" (Kendall & Babington Smith's cyclic triads). A tied duel counts half a win to each side.
A small prior (``prior`` virtual tied games per pair) keeps strengths finite when a model wins or loses
everything (``prior=0`` is the plain maximum-likelihood fit).
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np
import pandas as pd


def wins_matrix(duels: pd.DataFrame, models: list[str]) -> np.ndarray:
    """wins[i, j] = points of model i against model j (1 a win, 1/2 a tie) from rows model_a, model_b, score_a."""
    pos = {m: i for i, m in enumerate(models)}
    a = np.array([pos[m] for m in duels["model_a"]], dtype=int)
    b = np.array([pos[m] for m in duels["model_b"]], dtype=int)
    return _wins(a, b, duels["score_a"].to_numpy(dtype=float), len(models))


def _wins(a: np.ndarray, b: np.ndarray, score: np.ndarray, n: int) -> np.ndarray:
    wins = np.zeros((n, n))
    np.add.at(wins, (a, b), score)
    np.add.at(wins, (b, a), 1.0 - score)
    return wins


class BTFit(NamedTuple):
    theta: np.ndarray
    converged: bool
    iterations: int


def bradley_terry(wins: np.ndarray, prior: float = 0.0, max_iter: int = 200, tol: float = 1e-12) -> np.ndarray:
    """Log-strengths theta (mean 0) maximising the Bradley-Terry likelihood, P(i beats j) = 1/(1+e^(theta_j-theta_i)).

    ``wins[i, j]`` may be fractional (ties as halves). ``prior`` adds that many virtual tied games to every
    pair (a symmetric pseudo-count that keeps the estimate finite). Newton's method on the concave
    log-likelihood, the sum-to-zero constraint handled by adding 11'/n to the Hessian. See
    :func:`bradley_terry_fit` for the convergence flag.
    """
    return bradley_terry_fit(wins, prior, max_iter, tol).theta


def bradley_terry_fit(wins: np.ndarray, prior: float = 0.0, max_iter: int = 200, tol: float = 1e-12) -> BTFit:
    """:func:`bradley_terry` with whether Newton's method converged and in how many iterations.

    Without a prior, a model that never won or never lost has no finite strength: that is refused
    (ValueError) instead of returning a strength of ~20 after max_iter steps."""
    w = np.asarray(wins, dtype=float).copy()
    n = w.shape[0]
    if n < 2:
        return BTFit(np.zeros(n), True, 0)
    off = ~np.eye(n, dtype=bool)
    w[off] += prior / 2.0
    games = w + w.T
    won = w.sum(axis=1)
    if np.any(won <= 0):
        raise ValueError("a model without any win has no finite Bradley-Terry strength; use prior > 0")
    if np.any(w.sum(axis=0) <= 0):
        raise ValueError("a model without any loss has no finite Bradley-Terry strength; use prior > 0")
    theta = np.zeros(n)
    ones = np.full((n, n), 1.0 / n)

    def loglik(t: np.ndarray) -> float:
        d = t[:, None] - t[None, :]
        return float(np.sum(w * -np.logaddexp(0.0, -d)))

    current = loglik(theta)
    for iteration in range(1, max_iter + 1):
        prob = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
        grad = won - np.sum(games * prob, axis=1)
        info = games * prob * (1.0 - prob)
        hess = np.diag(info.sum(axis=1)) - info + ones
        step = np.linalg.solve(hess, grad)
        scale = 1.0
        while True:  # step halving keeps every iteration an ascent step
            candidate = theta + scale * step
            value = loglik(candidate)
            if value >= current - 1e-15 or scale < 1e-8:
                break
            scale /= 2
        theta, current = candidate - candidate.mean(), value
        if np.max(np.abs(scale * step)) < tol or np.max(np.abs(grad)) < tol:
            return BTFit(theta - theta.mean(), True, iteration)
    return BTFit(theta - theta.mean(), False, max_iter)


def bradley_terry_bootstrap(duels: pd.DataFrame, models: list[str], n_boot: int = 1000, prior: float = 0.5,
                            seed: int = 0) -> np.ndarray:
    """(n_boot, M) log-strengths refitted on duels resampled with replacement.

    A secondary, not used by the rankings: it treats the duels as independent draws and ignores how close
    each decision was. The rankings' intervals re-decide every duel per environment replicate instead
    (``core.rankings.tournament``)."""
    rng = np.random.default_rng(seed)
    out = np.full((n_boot, len(models)), np.nan)
    if duels.empty:
        return out
    pos = {m: i for i, m in enumerate(models)}
    a = np.array([pos[m] for m in duels["model_a"]], dtype=int)
    b = np.array([pos[m] for m in duels["model_b"]], dtype=int)
    score = duels["score_a"].to_numpy(dtype=float)
    for r in range(n_boot):
        pick = rng.integers(0, len(duels), size=len(duels))
        out[r] = bradley_terry(_wins(a[pick], b[pick], score[pick], len(models)), prior=prior)
    return out


def cyclic_triads(wins: np.ndarray) -> tuple[float, float, float]:
    """(c, c_max, zeta) of a round-robin tournament given points wins[i, j] (ties as halves).

    c = C(n,3) - sum_i [C(w_i, 2) + t_i/8] where w_i is i's points and t_i its number of tied games;
    without ties this is Kendall & Babington Smith's count of cyclic triads.
    """
    wins = np.asarray(wins, dtype=float)
    n = wins.shape[0]
    if n < 3:
        return 0.0, 0.0, float("nan")
    points = wins.sum(axis=1)
    ties = np.sum(np.isclose(wins, 0.5) & np.isclose(wins.T, 0.5), axis=1)
    c = math.comb(n, 3) - float(np.sum(points * (points - 1) / 2 + ties / 8))
    c_max = (n ** 3 - n) / 24 if n % 2 else (n ** 3 - 4 * n) / 24
    c = max(c, 0.0)
    return c, c_max, 1.0 - c / c_max


def observed_triads(wins: np.ndarray, played: np.ndarray) -> tuple[float, int, int]:
    """(expected cyclic triads, complete triads, all triads) counted over the triples whose three duels
    were all played; a tied duel is broken by a fair coin.

    Why: the closed form of :func:`cyclic_triads` assumes a round robin; with a > b, b > c and a-c missing
    it reports one cycle. Here a triple with a missing duel is not counted at all. On a complete
    tournament the two agree (ties included: each tie contributes the same 1/8 in expectation)."""
    wins = np.asarray(wins, dtype=float)
    played = np.asarray(played, dtype=bool)
    n = wins.shape[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        beats = np.where(played, wins / (wins + wins.T), np.nan)  # P(i beats j) in their duel
    c, complete, total = 0.0, 0, 0
    for i, j, k in itertools.combinations(range(n), 3):
        total += 1
        if not (played[i, j] and played[j, k] and played[i, k]):
            continue
        complete += 1
        c += beats[i, j] * beats[j, k] * beats[k, i] + beats[j, i] * beats[k, j] * beats[i, k]
    return float(c), complete, total
