"""Training admission from a joint prior over (p_cold, p_hint): the calibrated successor of ``admission``.

Why: the independent-Beta model of ``admission`` multiplies P(p_cold low) by P(p_hint high) as if the
two rates of an environment were unrelated. They are not: an environment a learner fails cold is
usually hard with the hint too, so p_hint tracks p_cold. On the calibration benchmark that model
expected 0.23-0.37 false admissions per admitted row and got 0.93-0.97. Here the rates of the rows
share one prior G over the unit square, estimated from the data themselves (empirical Bayes, the
Kiefer-Wolfowitz nonparametric MLE on a grid, fitted by EM, smoothed towards uniform by a few
pseudo-row so that a small warehouse is not overconfident). Each row's posterior is
G(p_c, p_h) * Binom(k_c; n, p_c) * Binom(k_h; n, p_h) normalised; the paired seeds enter through
their counts (given the rates, a seed's cold and hinted outcomes are independent draws).

* ``p_learnable``: posterior mass of {p_cold <= cold_ceiling, p_hint >= min_hint};
* ``joint_lift_interval``: central posterior interval of p_hint - p_cold (never zero-width: the
  grid has width, and n seeds never pin a rate); ``robust_lift_interval`` (what ``training_set``
  publishes): its union with the same interval under the uniform prior;
* ``expected_false_admissions`` of a set is the sum of 1 - p_learnable over its admitted rows.

Assumption: the rows that fit G are exchangeable (one population of (environment, learner) rates).
Pooling every learner of the warehouse gives G enough rows; the learner's own rows alone are too few
below ~100 (measured in docs/STATISTICS.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

GRID = 40  # bins per axis; points at bin midpoints (1/80 .. 79/80)
MIN_ROWS = 50  # fewer rows fit the prior: probabilities published, flagged "insufficient data" (not calibrated)


@dataclass(frozen=True)
class JointPrior:
    """Weights of the grid points (GRID x GRID, cold along axis 0) and how many rows fitted them."""

    weights: np.ndarray
    n_rows: int
    iterations: int

    @property
    def points(self) -> np.ndarray:
        return (np.arange(GRID) + 0.5) / GRID


def _likelihood(k, n) -> np.ndarray:
    """Binomial likelihood of each row's k successes of n at each grid rate (rows x GRID)."""
    from scipy.stats import binom

    k, n = np.asarray(k, float), np.asarray(n, float)
    if np.any((k < 0) | (k > n)):
        raise ValueError(f"successes outside 0..n: {k[(k < 0) | (k > n)][:3]} of {n[(k < 0) | (k > n)][:3]} seeds")
    p = (np.arange(GRID) + 0.5) / GRID
    return binom.pmf(np.asarray(k, float)[:, None], np.asarray(n, float)[:, None], p[None, :])


def _joint_likelihood(cold, hint, n) -> np.ndarray:
    """Rows x GRID*GRID likelihood (cold index major), the product of the two binomials."""
    lc, lh = _likelihood(cold, n), _likelihood(hint, n)
    return (lc[:, :, None] * lh[:, None, :]).reshape(len(lc), -1)


def fit_joint_prior(cold, hint, n, smoothing: float = 1.0, max_iter: int = 500, tol: float = 1e-8) -> JointPrior:
    """NPMLE of the rates' joint distribution by EM from the uniform, with ``smoothing`` uniform pseudo-rows.

    500 iterations at most: the EM's early stop is part of the smoothing (measured: more iterations
    concentrate the mass on a few points and overstate P near the region's edge). Rows with no seed
    carry no information and are ignored."""
    cold, hint, n = (np.asarray(x, float) for x in (cold, hint, n))
    ok = n >= 1
    rows = int(ok.sum())
    uniform = np.full(GRID * GRID, 1.0 / GRID ** 2)
    if rows == 0:
        return JointPrior(uniform.reshape(GRID, GRID), 0, 0)
    lik = _joint_likelihood(cold[ok], hint[ok], n[ok])
    w, it = uniform.copy(), 0
    for it in range(1, max_iter + 1):  # noqa: B007 -- the last value is the iteration count returned
        new = (w * (lik.T @ (1.0 / (lik @ w))) + smoothing * uniform) / (rows + smoothing)
        done = np.abs(new - w).max() < tol
        w = new
        if done:
            break
    return JointPrior(w.reshape(GRID, GRID), rows, it)


def posterior(prior: JointPrior, cold, hint, n) -> np.ndarray:
    """Rows x GRID x GRID posterior of (p_cold, p_hint) for each row."""
    post = _joint_likelihood(cold, hint, n).reshape(-1, GRID, GRID) * prior.weights[None]
    return post / post.sum(axis=(1, 2), keepdims=True)


def joint_learnable_probability(prior: JointPrior, cold, hint, n, cold_ceiling: float = 0.25,
                                min_hint: float = 0.5) -> np.ndarray:
    """P(p_cold <= cold_ceiling and p_hint >= min_hint | the row's counts, the prior)."""
    cold = np.atleast_1d(np.asarray(cold, float))
    if cold.size == 0:
        return np.zeros(0)
    p = prior.points
    region = (p[:, None] <= cold_ceiling + 1e-12) & (p[None, :] >= min_hint - 1e-12)
    return (posterior(prior, cold, hint, n) * region[None]).sum(axis=(1, 2))


def joint_lift_interval(prior: JointPrior, cold, hint, n, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Central (1 - alpha) posterior interval of p_hint - p_cold per row (grid points spread uniformly in
    their bins, so the bounds interpolate instead of snapping to multiples of 1/GRID)."""
    cold = np.atleast_1d(np.asarray(cold, float))
    if cold.size == 0:
        return np.zeros(0), np.zeros(0)
    p = prior.points
    diff = (p[None, :] - p[:, None]).ravel()  # hint - cold, cold along axis 0
    order = np.argsort(diff, kind="stable")
    d = diff[order]
    mass = posterior(prior, cold, hint, n).reshape(cold.size, -1)[:, order]
    cdf = np.cumsum(mass, axis=1)
    lo = np.array([np.interp(alpha / 2, c, d) for c in cdf]) - 1.0 / GRID
    hi = np.array([np.interp(1 - alpha / 2, c, d) for c in cdf]) + 1.0 / GRID
    return np.clip(lo, -1, 1), np.clip(hi, -1, 1)


def uniform_prior() -> JointPrior:
    """The reference prior: uniform on the grid (each rate's posterior is then its own Beta(k + 1, n - k + 1)
    posterior, discretised; no borrowing from the other rows)."""
    return JointPrior(np.full((GRID, GRID), 1.0 / GRID ** 2), 0, 0)


def robust_lift_interval(prior: JointPrior, cold, hint, n, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """The published lift interval of a training row: the union of the central (1 - alpha) posterior intervals
    of p_hint - p_cold under the fitted prior and under the uniform reference prior.

    Why neither alone (measured, docs/STATISTICS.md, ``benchmarks/calibration_training_interval.py``): the
    published rows are the admitted ones, selected on the same counts. Under the fitted prior the interval
    covered 0.85-0.87 of admitted rows on the mixture generator (the NPMLE, a few atoms, is too
    concentrated); under the uniform prior it covered 0.62 of admitted rows on the lift generator (no
    shrinkage, so the selected rows' high observed lifts are taken at face value). The union holds
    under both; the intervals under the mixtures (1 - e) G + e U for e in (0, 1) measured inside it."""
    lo_fit, hi_fit = joint_lift_interval(prior, cold, hint, n, alpha)
    lo_ref, hi_ref = joint_lift_interval(uniform_prior(), cold, hint, n, alpha)
    return np.minimum(lo_fit, lo_ref), np.maximum(hi_fit, hi_ref)


def counts(stats: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cold successes, hinted successes, matched seeds) of ``env_solver_stats`` rows."""
    n = stats["n_seeds"].to_numpy(dtype=float)
    return np.rint(stats["p_cold"].to_numpy() * n), np.rint(stats["p_hint"].to_numpy() * n), n


PROFILE_DROP = 1.92  # half the 95% point of chi-square(1): the region-mass values the data cannot reject


@dataclass(frozen=True)
class FalseAdmissionBound:
    """The expected false admissions of a set at the least favourable region mass the data allow.

    ``upper``: Sum over the admitted rows of 1 - P(learnable) under the tilted prior with the smallest
    allowed mass in the learnable region (never below the fitted prior's figure); ``region_mass_fit`` the
    fitted prior's mass of the region, ``region_mass_low``/``_high`` the range the profile likelihood keeps."""

    upper: float
    region_mass_fit: float
    region_mass_low: float
    region_mass_high: float


def false_admission_bound(prior: JointPrior, fit_counts, admitted_counts, cold_ceiling: float = 0.25,
                          min_hint: float = 0.5, drop: float = PROFILE_DROP) -> FalseAdmissionBound:
    """Profile-likelihood bound on the expected false admissions: how much of P(learnable) is the data's.

    Why: with a few seeds per row the binomial counts identify only low moments of the prior, so the
    prior's mass in the learnable region (and with it every P) can be far from the truth at almost no cost
    in likelihood (measured on the tournament benchmark: the true prior fits its data within 3 nats of the
    fitted one, with 1/6 of its region mass). The family G_t = G * (t on the region, 1 off), renormalised,
    moves only that mass; t ranges over the values whose log likelihood on ``fit_counts`` (the rows that
    fitted G) is within ``drop`` of the best, and t = 1 (the fit) is always kept. ``admitted_counts``: the
    (cold, hinted, n) counts of the admitted rows."""
    p = prior.points
    region = ((p[:, None] <= cold_ceiling + 1e-12) & (p[None, :] >= min_hint - 1e-12)).ravel()
    w = prior.weights.ravel()
    mass = float(w[region].sum())
    cold = np.atleast_1d(np.asarray(admitted_counts[0], float))
    if not 0.0 < mass < 1.0 or prior.n_rows == 0:
        ka, ha, na = admitted_counts
        upper = float(len(cold) - joint_learnable_probability(prior, ka, ha, na, cold_ceiling,
                                                              min_hint).sum()) if cold.size else 0.0
        return FalseAdmissionBound(upper, mass, mass, mass)
    c, h, n = (np.asarray(x, float) for x in fit_counts)
    ok = n >= 1
    lik = _joint_likelihood(c[ok], h[ok], n[ok])
    a, b = lik @ (w * region), lik @ (w * ~region)
    t = np.exp(np.linspace(np.log(1e-6), np.log(1e3), 901))
    ll = np.log(t[:, None] * a[None] + b[None]).sum(axis=1) - ok.sum() * np.log(t * mass + 1 - mass)
    kept = t[ll >= ll.max() - drop]
    lo, hi = min(kept.min(), 1.0), max(kept.max(), 1.0)
    tilted = lambda s: s * mass / (s * mass + 1 - mass)  # noqa: E731 -- the region mass of G_s
    if not cold.size:
        return FalseAdmissionBound(0.0, mass, tilted(lo), tilted(hi))
    la = _joint_likelihood(*admitted_counts)
    a_adm, b_adm = la @ (w * region), la @ (w * ~region)
    upper = float((b_adm / (lo * a_adm + b_adm)).sum())
    return FalseAdmissionBound(upper, mass, tilted(lo), tilted(hi))
