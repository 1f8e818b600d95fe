"""t intervals for the leaderboard's scores, environments as units (issue 16: calibrated where shown).

Why not the bootstrap columns: the stratified cluster bootstrap of ``core.rankings.leaderboard`` covers an author's
hint score 0.67 of the time at 3 environments per author (nominal 0.95; docs/STATISTICS.md). An
author's score is a mean over its environments, so its interval is ``core.stats.mean_interval``. A solver's
score is a mean over strata: within each domain over the other authors' environments, each author's
environments a fixed-size sample of its own. Its variance is the sum of the strata's sampling variances,
and the degrees of freedom come from Welch-Satterthwaite. When an author has a single environment in a
domain, that domain's strata are collapsed into one (every environment of the domain one sample: the usual
collapsed-strata estimator, which counts the between-author spread as sampling variance, so it errs wide);
only a domain with a single environment in all withholds the interval, with a reason. Until 1 Dec 2026 a
single-environment stratum withheld it, and at the demo's 10 environments per author (4 domains) no solver had
an interval at all.
"""

from __future__ import annotations

import math

import numpy as np

from envduels_dagster.core.stats.intervals import MIN_ENVS, NO_SPREAD, insufficient, mean_interval, t_critical

ONE_PER_STRATUM = "insufficient data: a domain has a single environment (its variance is unknown)"


def author_intervals(authors_of_env: np.ndarray, per_env: np.ndarray, authors: list[str],
                     bounds=(-1.0, 1.0)) -> dict[str, tuple[float, float, str | None]]:
    """Per author: (lower, upper, reason) of the mean of ``per_env`` over its environments."""
    out = {}
    for a in authors:
        ci = mean_interval(per_env[authors_of_env == a], bounds=bounds)
        out[a] = (ci.lower, ci.upper, ci.reason)
    return out


def stratified_interval(estimate: float, values: np.ndarray, domains: np.ndarray, strata: np.ndarray,
                        alpha: float = 0.05) -> tuple[float, float, str | None]:
    """t interval of the mean over domains of the within-domain mean of ``values`` (NaN = not a peer)."""
    ok = ~np.isnan(values)
    if ok.sum() < MIN_ENVS:
        return float("nan"), float("nan"), insufficient(int(ok.sum()), MIN_ENVS)
    doms = sorted(set(domains[ok]))
    comps = []  # (variance contribution, stratum size)
    for d in doms:
        in_d = ok & (domains == d)
        n_d = in_d.sum()
        blocks = [values[in_d & (strata == a)] for a in sorted(set(strata[in_d]))]
        if min(x.size for x in blocks) < 2:  # collapse the domain's strata into one sample
            blocks = [values[in_d]]
        for x in blocks:
            if x.size < 2:
                return float("nan"), float("nan"), ONE_PER_STRATUM
            comps.append((x.size * x.var(ddof=1) / n_d ** 2 / len(doms) ** 2, x.size))
    var = sum(c for c, _ in comps)
    if var < 1e-24:
        return float("nan"), float("nan"), NO_SPREAD
    df = var ** 2 / sum(c * c / (n - 1) for c, n in comps if c > 0)
    half = t_critical(df, alpha) * math.sqrt(var)
    return max(estimate - half, 0.0), min(estimate + half, 1.0), None
