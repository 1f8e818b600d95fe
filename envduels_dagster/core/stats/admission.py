"""Training-set admission as a probability: how sure are we that an environment is learnable?

Why: the fixed rule (0 cold successes, >= half hinted, on 4 seeds) admits an environment whose true
cold success is 0.3 a quarter of the time (0.7^4 = 0.24), and gives each row no uncertainty. Here
"learnable" is a statement about the true rates of (environment, learner): p_cold <= ``cold_ceiling``
(the learner mostly fails without the hint) and p_hint >= ``min_hint`` (it mostly passes with it). With
Jeffreys priors Beta(1/2, 1/2) and the seeds' successes, the cold and hinted posteriors are Beta; treating
the two conditions as independent given the rates (the seeds are paired, but each condition's success is
its own Bernoulli draw), P(learnable | data) = P(p_cold <= ceiling) * P(p_hint >= min_hint). An
environment is admitted when that probability reaches ``threshold``; the expected number of false
admissions of a set is the sum of (1 - P) over it. The lift of each row gets the central posterior
interval of p_hint - p_cold (Monte Carlo with a fixed seed, so rows are reproducible).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

PRIOR = (0.5, 0.5)


def fit_beta_prior(successes, n, floor: float = 0.5) -> tuple[float, float]:
    """Empirical-Bayes Beta(a, b) for the true rates behind ``successes`` out of ``n`` (method of moments).

    The variance of the true rates is the observed variance of k/n minus the binomial noise
    E[r (1 - r) / (n - 1)]; a + b = mu (1 - mu) / var - 1. Falls back to Jeffreys when the data cannot
    tell (fewer than 10 rows, or no variance left after the noise); a and b are kept >= ``floor``."""
    k, n = np.asarray(successes, dtype=float), np.asarray(n, dtype=float)
    ok = n >= 2
    if ok.sum() < 10:
        return PRIOR
    r, m = k[ok] / n[ok], n[ok]
    mu = float(r.mean())
    var = float(r.var(ddof=1) - np.mean(r * (1 - r) / (m - 1)))
    if not 0 < mu < 1 or var <= 0:
        return PRIOR
    total = mu * (1 - mu) / var - 1
    if total <= 0:
        return PRIOR
    return max(mu * total, floor), max((1 - mu) * total, floor)


def learnable_probability(cold, hint, n, cold_ceiling: float = 0.25, min_hint: float = 0.5,
                          prior: tuple[float, float] = PRIOR,
                          hint_prior: tuple[float, float] | None = None) -> np.ndarray:
    """P(p_cold <= cold_ceiling and p_hint >= min_hint | cold, hint successes on n paired seeds).

    ``prior`` is the Beta prior of the cold rate, ``hint_prior`` that of the hinted rate (default: the same)."""
    from scipy.stats import beta

    cold, hint, n = (np.asarray(x, dtype=float) for x in (cold, hint, n))
    a, b = prior
    ha, hb = hint_prior or prior
    p_cold_ok = beta.cdf(cold_ceiling, a + cold, b + n - cold)
    p_hint_ok = beta.sf(min_hint, ha + hint, hb + n - hint)
    return p_cold_ok * p_hint_ok


def lift_posterior_interval(cold, hint, n, alpha: float = 0.05, draws: int = 20000, seed: int = 0,
                            prior: tuple[float, float] = PRIOR) -> tuple[np.ndarray, np.ndarray]:
    """Central (1 - alpha) posterior interval of p_hint - p_cold for each row."""
    cold, hint, n = (np.atleast_1d(np.asarray(x, dtype=float)) for x in (cold, hint, n))
    rng = np.random.default_rng(seed)
    a, b = prior
    d = (rng.beta(a + hint[:, None], b + n[:, None] - hint[:, None], (hint.size, draws))
         - rng.beta(a + cold[:, None], b + n[:, None] - cold[:, None], (cold.size, draws)))
    lo, hi = np.quantile(d, [alpha / 2, 1 - alpha / 2], axis=1)
    return lo, hi


def _counts(stats: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = stats["n_seeds"].to_numpy(dtype=float)
    return np.rint(stats["p_cold"].to_numpy() * n), np.rint(stats["p_hint"].to_numpy() * n), n


def admission_table(stats: pd.DataFrame, learner: str, threshold: float = 0.5, cold_ceiling: float = 0.25,
                    min_hint: float = 0.5, include_self_authored: bool = False,
                    empirical_prior: bool = True) -> pd.DataFrame:
    """The learner's rows of ``env_solver_stats`` with p_learnable, admitted and a posterior lift interval.

    ``empirical_prior``: the Beta priors of the cold and hinted rates are fitted to the learner's rows
    (``fit_beta_prior``) instead of Jeffreys'. Admitted rows first, most probable first;
    ``expected_false_admissions(table)`` sums 1 - p over them."""
    s = stats[stats["solver"] == learner]
    if not include_self_authored:
        s = s[s["author"] != learner]
    s = s.copy()
    cold, hint, n = _counts(s)
    priors = (fit_beta_prior(cold, n), fit_beta_prior(hint, n)) if empirical_prior else (PRIOR, PRIOR)
    s["p_learnable"] = learnable_probability(cold, hint, n, cold_ceiling, min_hint, *priors)
    s["admitted"] = s["p_learnable"] >= threshold
    if len(s):
        s["lift_post_lower"], s["lift_post_upper"] = lift_posterior_interval(cold, hint, n)
    else:
        s["lift_post_lower"], s["lift_post_upper"] = [], []
    return s.sort_values(["admitted", "p_learnable", "env_id"], ascending=[False, False, True]).reset_index(drop=True)


def expected_false_admissions(table: pd.DataFrame) -> float:
    """Sum over admitted rows of the probability that the row is not learnable."""
    return float((1.0 - table.loc[table["admitted"], "p_learnable"]).sum())
