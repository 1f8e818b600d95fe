"""False-positive rate and power of the lift -> learning test in its crossed design (issue 16).

    .venv/bin/python benchmarks/calibration_learning.py [--models 4 5 6 8] [--reps 1000] [--n-perm 999]

Why synthetic: only there is the null known. Each replicate is one learner x author table from
``tests/helpers/synthetic_learning.py`` (every model learns from every other author; learner and author
effects N(0, 1) in lift and in gain, row noise N(0, 0.5^2)). Under the null the two are independent; with
``slope`` the gain also follows the row part of lift (an association inside the crossing). Printed: the share
of replicates with p < 0.05 for the published test (``core.stats.crossed``, Freedman-Lane) and for the
within-learner shuffle it replaced (``stratified_permutation_pvalue``), with its binomial standard error.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def rates(models: int, reps: int, n_perm: int, slope: float, seed: int = 0) -> dict[str, float]:
    from envduels_dagster.core.stats.crossed import crossed_permutation_pvalue
    from envduels_dagster.core.stats.ranks import stratified_permutation_pvalue
    from tests.helpers.synthetic_learning import crossed_table

    crossed = learner = withheld = 0
    for r in range(reps):
        df = crossed_table(np.random.default_rng(seed * 1000003 + models * 10007 + r), models, slope=slope)
        x, y = df["lift"].to_numpy(), df["gain"].to_numpy()
        p = crossed_permutation_pvalue(x, y, df["learner"].to_numpy(object), df["author"].to_numpy(object),
                                       n_perm=n_perm, seed=r)[1]
        withheld += bool(np.isnan(p))
        crossed += bool(p < 0.05)
        learner += bool(stratified_permutation_pvalue(x, y, df["learner"].to_numpy(object), n_perm=n_perm,
                                                      seed=r)[1] < 0.05)
    return {"crossed": crossed / reps, "learner_only": learner / reps, "withheld": withheld / reps}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, nargs="+", default=[4, 5, 6, 8])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--n-perm", type=int, default=999)
    parser.add_argument("--slopes", type=float, nargs="+", default=[0.0, 1.0, 2.0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"lift -> learning, rejections at 0.05: {args.reps} tables a cell, {args.n_perm} permutations")
    print("| models (rows) | slope | crossed (published) | within learner only | withheld |")
    print("|---|---|---|---|---|")
    for models in args.models:
        for slope in args.slopes:
            t0 = time.perf_counter()
            r = rates(models, args.reps, args.n_perm, slope, args.seed)
            se = np.sqrt(r["crossed"] * (1 - r["crossed"]) / args.reps)
            print(f"| {models} ({models * (models - 1)}) | {slope:g} | {r['crossed']:.3f} (SE {se:.3f}) | "
                  f"{r['learner_only']:.3f} | {r['withheld']:.2f} | <!-- {time.perf_counter() - t0:.0f} s -->",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
