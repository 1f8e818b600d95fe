"""Tournaments in batches: Bradley-Terry, separation and triads of R tournaments at once (issue 16).

Why batches: the rankings' tournament intervals refit Bradley-Terry and recount the triads on every
environment-bootstrap replicate (1000 by default); one Python-level Newton loop per replicate costs seconds,
one loop over a (R, n, n) stack costs milliseconds. The point estimate is the batch of one, so point and
replicates share this code.

A tournament here is ``score`` (R, n, n): ``score[r, i, j]`` the points of i against j in their duel (1, 1/2 or
0; ``score[r, j, i] = 1 - score[r, i, j]``) and ``played`` (R, n, n), False where the duel is missing. A missing
duel is missing: it is neither a loss nor a tie (it enters Bradley-Terry only through the prior, which adds
``prior`` virtual tied games to every pair, played or not, so that the fit is always defined).
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np


class BTBatch(NamedTuple):
    theta: np.ndarray  # (R, n) log-strengths, mean 0 per replicate
    converged: np.ndarray  # (R,) bool
    iterations: np.ndarray  # (R,) Newton iterations used


def wins_from_score(score: np.ndarray, played: np.ndarray) -> np.ndarray:
    """(R, n, n) points matrices: the score where the duel was played, 0 elsewhere (and on the diagonal)."""
    return np.where(played, np.nan_to_num(score), 0.0)


def _loglik(w: np.ndarray, theta: np.ndarray) -> np.ndarray:
    d = theta[:, :, None] - theta[:, None, :]
    return np.sum(w * -np.logaddexp(0.0, -d), axis=(1, 2))


def bradley_terry_batch(wins: np.ndarray, prior: float = 0.5, max_iter: int = 100, tol: float = 1e-12) -> BTBatch:
    """Bradley-Terry log-strengths of each of R points matrices (R, n, n), Newton's method with step halving.

    The same estimator as :func:`core.stats.tournament.bradley_terry_fit` (symmetric prior of ``prior`` virtual
    tied games per pair, sum-to-zero constraint via 11'/n in the Hessian), vectorised over replicates. With
    ``prior = 0`` a separated tournament (see :func:`separated`) has no finite maximum: it is not refused
    here, its replicate is returned with ``converged = False`` (the gradient would vanish at theta ~ 14)."""
    w = np.asarray(wins, dtype=float).copy()
    r_count, n = w.shape[0], w.shape[1]
    if n < 2:
        return BTBatch(np.zeros((r_count, n)), np.ones(r_count, dtype=bool), np.zeros(r_count, dtype=int))
    off = ~np.eye(n, dtype=bool)
    w[:, off] += prior / 2.0
    games = w + np.swapaxes(w, 1, 2)
    won = w.sum(axis=2)
    theta = np.zeros((r_count, n))
    done = np.zeros(r_count, dtype=bool)
    iterations = np.zeros(r_count, dtype=int)
    current = _loglik(w, theta)
    ones = np.full((n, n), 1.0 / n)
    for _ in range(max_iter):
        act = ~done
        if not act.any():
            break
        t, g_w, g = theta[act], w[act], games[act]
        iterations[act] += 1
        prob = 1.0 / (1.0 + np.exp(-(t[:, :, None] - t[:, None, :])))
        grad = won[act] - np.sum(g * prob, axis=2)
        info = g * prob * (1.0 - prob)
        hess = ones - info
        hess[:, np.arange(n), np.arange(n)] += info.sum(axis=2)
        step = np.linalg.solve(hess, grad[:, :, None])[:, :, 0]
        scale = np.ones(len(t))
        base = current[act]
        cand = t + step
        value = _loglik(g_w, cand)
        for _halving in range(30):  # step halving keeps every iteration an ascent step
            bad = value < base - 1e-15
            if not bad.any():
                break
            scale[bad] /= 2
            cand[bad] = t[bad] + scale[bad, None] * step[bad]
            value[bad] = _loglik(g_w[bad], cand[bad])
        cand -= cand.mean(axis=1, keepdims=True)
        moved = np.max(np.abs(scale[:, None] * step), axis=1)
        finished = (moved < tol) | (np.max(np.abs(grad), axis=1) < tol)
        theta[act], current[act] = cand, value
        idx = np.flatnonzero(act)
        done[idx[finished]] = True
    if prior <= 0:  # the gradient vanishes as strengths run off to infinity: that is not convergence
        done &= ~separated(wins)
    return BTBatch(theta - theta.mean(axis=1, keepdims=True), done, iterations)


def separated(wins: np.ndarray) -> np.ndarray:
    """(R,) True where the plain Bradley-Terry maximum does not exist (Ford's condition fails).

    It exists iff the "scored against" graph (i -> j when i took points from j; a tie goes both ways) is
    strongly connected. An unbeaten or winless model, or a top group that never dropped a point to the rest,
    makes it fail: its strengths are then set by the prior alone, not by the data."""
    reach = np.asarray(wins, dtype=float) > 0
    n = reach.shape[1]
    reach = reach | np.eye(n, dtype=bool)[None]
    for k in range(n):  # Warshall's transitive closure
        reach = reach | (reach[:, :, k:k + 1] & reach[:, k:k + 1, :])
    if n <= 1:
        return np.zeros(reach.shape[0], dtype=bool)
    return np.asarray(~reach.all(axis=(1, 2)))


class TriadBatch(NamedTuple):
    cyclic: np.ndarray  # (R,) expected cyclic triads (ties broken by a fair coin), over complete triples only
    zeta: np.ndarray  # (R,) Kendall's zeta; NaN unless every duel of the replicate was played
    n_complete: np.ndarray  # (R,) triples whose three duels were played
    n_triads: int
    c_max: float


def triads_batch(score: np.ndarray, played: np.ndarray) -> TriadBatch:
    """Cyclic triads and Kendall's zeta of R tournaments, counted over the triples with all three duels.

    ``score`` holds P(i beats j) of each played duel (one duel per pair: 1, 1/2, 0). A triple (i, j, k) is cyclic
    with probability b_ij b_jk b_ki + b_ji b_kj b_ik; summed over complete triples this is the expected count
    when ties are broken by fair coins, and on a round robin it equals the closed form of
    :func:`core.stats.tournament.cyclic_triads` (tested). zeta = 1 - c / c_max needs a round robin."""
    score = np.where(played, np.nan_to_num(score), 0.0)
    r_count, n = score.shape[0], score.shape[1]
    combos = np.array(list(itertools.combinations(range(n), 3)), dtype=int).reshape(-1, 3)
    c_max = ((n ** 3 - n) / 24 if n % 2 else (n ** 3 - 4 * n) / 24) if n >= 3 else 0.0
    if not len(combos):
        nan = np.full(r_count, np.nan)
        return TriadBatch(np.zeros(r_count), nan, np.zeros(r_count, dtype=int), 0, c_max)
    i, j, k = combos.T
    ok = played[:, i, j] & played[:, j, k] & played[:, i, k]
    b = lambda x, y: score[:, x, y]  # noqa: E731
    cyc = b(i, j) * b(j, k) * b(k, i) + b(j, i) * b(k, j) * b(i, k)
    cyclic = np.sum(np.where(ok, cyc, 0.0), axis=1)
    complete = ok.sum(axis=1)
    zeta = np.where(complete == len(combos), 1.0 - cyclic / c_max, np.nan)
    return TriadBatch(cyclic, zeta, complete, math.comb(n, 3), c_max)
