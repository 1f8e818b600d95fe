"""Coverage of the corrected design score's t interval by environments per author and seeds (2 Dec 2026).

    .venv/bin/python benchmarks/calibration_design_t.py [--seeds 4 8] [--reps 5000]

Why: ``benchmarks/calibration.py`` measures ``design_score_corrected_ci_*`` at a few sizes with 400 intervals
a cell (dbt marts, ``core.rankings.leaderboard``); this sweeps every size from 3 to 60 with 20,000 intervals a cell
(SE ~0.002) on the same generator (an author's environments: base rate U(0.05, 0.30) + shift, its three peers'
cold rates base + skill, skills 0 / .05 / .10 / .15, ``seeds`` Bernoulli draws each), without dbt: the
per-environment values are ``core.stats.discrimination.corrected_discrimination_rows`` and the interval is
``core.stats.intervals.mean_interval``'s t (vectorised here; checked equal to it on the first draws).
The truth is the noise-free value, the same for every environment of an author. Printed per seeds: coverage
per size, the share of misses with the truth above the upper bound, and the values' skewness.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SKILL = np.array([0.0, 0.05, 0.10, 0.15])
SHIFT = np.array([0.0, 0.05, 0.0, 0.05])
SIZES = (*range(3, 21), 24, 30, 40, 60)


def coverage(envs: int, seeds: int, reps: int, rng: np.random.Generator) -> tuple[float, float, float]:
    """(coverage, share missed above, skewness of the values) over 4 authors x ``reps`` draws."""
    from scipy import stats

    from envduels_dagster.core.stats.discrimination import corrected_discrimination_rows
    from envduels_dagster.core.stats.intervals import mean_interval

    ok, above, skews = [], [], []
    for a in range(4):
        peers = np.delete(SKILL, a)
        truth = (3 * (peers ** 2).sum() - peers.sum() ** 2) / 2
        base = rng.uniform(0.05, 0.30, (reps, envs)) + SHIFT[a]
        rates = rng.binomial(seeds, base[..., None] + peers) / seeds
        d = corrected_discrimination_rows(rates.reshape(-1, 3), np.full((reps * envs, 3), float(seeds)))
        d = d.reshape(reps, envs)
        mean, se = d.mean(1), d.std(1, ddof=1) / np.sqrt(envs)
        half = stats.t.ppf(0.975, envs - 1) * se
        lo, hi = np.maximum(mean - half, -1.0), np.minimum(mean + half, 1.0)
        for i in range(3):  # the product's interval, row by row
            ci = mean_interval(d[i])
            assert ci.reason is not None or (abs(ci.lower - lo[i]) < 1e-12 and abs(ci.upper - hi[i]) < 1e-12)
        shown = se > 1e-12
        ok.append(((lo <= truth + 1e-12) & (truth <= hi + 1e-12))[shown])
        above.append((truth > hi + 1e-12)[shown])
        skews.append(float(stats.skew(d.ravel())))
    return float(np.concatenate(ok).mean()), float(np.concatenate(above).mean()), float(np.mean(skews))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--reps", type=int, default=5000, help="draws per author and size (4 authors)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for seeds in args.seeds:
        rng = np.random.default_rng(args.seed + seeds)
        print(f"{seeds} seeds, n = {4 * args.reps} a size (SE ~{np.sqrt(.93 * .07 / (4 * args.reps)):.4f}):")
        for envs in SIZES:
            cov, above, skew = coverage(envs, seeds, args.reps, rng)
            print(f"  {envs:2d} envs/author: coverage {cov:.3f}, missed above {above:.3f}, skewness {skew:.2f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
