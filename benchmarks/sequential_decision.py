"""Error rates of the sequential decision rule and calibration of the size estimate, on synthetic tournaments
with known truth (``core/value/decision.py``; issue 42). Pure Python, no Dagster, no model calls.

    .venv/bin/python benchmarks/sequential_decision.py [--runs 400] [--seeds 8] [--n-boot 1000]

1. The sequential run (``envduels run --until-decided``): start at ``--start`` environments per author, add
   ``--wave`` per author after each look, stop when ``decide`` names a leader or at ``--max-envs``.
   * null tournaments (3 authors, every learnable rate 0.3): how often a winner is declared (goal <= 0.05);
   * planted ones (one author's rate higher by ``--deltas``): how often the planted best is named, how often
     another author, and the environments per author the run needed (mean, median, 90th percentile).
2. The size estimate (``envs_needed``, what ``envduels plan`` prints after a pilot): a pilot of ``--pilot``
   environments per author estimates each author's rate; the estimate's size, played in one look, should name
   the true best with p_best >= 0.9 in about ``POWER`` (0.8) of tournaments. Reported: that share.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envduels_dagster.core.value import decision as d  # noqa: E402

BASE = 0.3
AUTHORS = ("a", "b", "c")


def sequential(rng, rates, start, wave, max_envs, seeds, n_boot, posterior):
    have = d.simulate_tournament(rng, rates, start, seeds, posterior)
    while True:
        dec = d.decide(have, n_boot=n_boot, seed=int(rng.integers(1 << 31)))
        n = len(next(iter(have.values())))
        if dec.decided or n + wave > max_envs:
            return dec, n
        have = d.extend(rng, rates, have, wave, seeds, posterior)


def run_sequential(runs, start, wave, max_envs, seeds, n_boot, posterior, deltas):
    rows = []
    for delta in deltas:
        rng = np.random.default_rng(int(delta * 100) + 7)
        rates = {a: BASE for a in AUTHORS}
        rates["a"] = BASE + delta
        t0 = time.perf_counter()
        named, right, sizes = 0, 0, []
        for _ in range(runs):
            dec, n = sequential(rng, rates, start, wave, max_envs, seeds, n_boot, posterior)
            sizes.append(n)
            if dec.decided:
                named += 1
                right += dec.leader == "a"
        sizes_a = np.array(sizes)
        rows.append((delta, runs, named / runs, (right / runs) if delta else float("nan"),
                     (named - right) / runs if delta else named / runs, sizes_a.mean(), np.median(sizes_a),
                     np.quantile(sizes_a, 0.9), time.perf_counter() - t0))
    print(f"\nsequential rule: start {start}, wave {wave}, max {max_envs} envs per author "
          f"({1 + (max_envs - start) // wave} looks, p_best >= {d.DECIDE_P_BEST}), {seeds} seeds, 3 authors at {BASE} "
          f"with author a + delta, P(learnable) {posterior}, n_boot {n_boot}")
    print("delta  runs  declared  planted-best  wrong  envs/author mean  median  p90  seconds")
    for r in rows:
        print(f"{r[0]:5.1f} {r[1]:5d} {r[2]:9.3f} {r[3]:13.3f} {r[4]:6.3f} {r[5]:17.1f} {r[6]:7.0f} {r[7]:4.0f} "
              f"{r[8]:8.0f}")


def run_size(runs, pilot, seeds, n_boot, posterior):
    print(f"\nsize estimate: pilot {pilot} envs per author, then one look at the estimated size; target p_best >= "
          f"{d.TARGET} in {d.POWER} of runs; 3 authors, best rate U(0.3, 0.7), gap to the second U(0.1, 0.4), "
          f"P(learnable) {posterior}")
    rng = np.random.default_rng(11)
    hits, hits2, none, sizes = [], [], 0, []
    t0 = time.perf_counter()
    for _ in range(runs):
        best = rng.uniform(0.3, 0.7)
        gap = rng.uniform(0.1, 0.4)
        rates = {"a": best, "b": max(best - gap, 0.0), "c": max(best - gap - rng.uniform(0, 0.1), 0.0)}
        pil = d.simulate_tournament(rng, rates, pilot, seeds, posterior)
        n_est = d.envs_needed(pil, sizing=d.Sizing(sims=60, n_boot=n_boot // 2, seed=int(rng.integers(1 << 31))))
        if n_est is None:
            none += 1
            continue
        for n, out in ((n_est, hits), (2 * n_est, hits2)):  # the estimate, and twice it
            t = d.simulate_tournament(rng, rates, n, seeds, posterior)
            pb = d.p_best(t, n_boot=n_boot, seed=int(rng.integers(1 << 31)))
            out.append(pb["a"] >= d.TARGET)
        sizes.append(n_est)
    hit = np.array(hits, bool)
    print(f"runs {runs}: the estimated size reached p_best >= {d.TARGET} on the true best in {hit.mean():.3f} "
          f"(n = {hit.size}, SE {np.sqrt(hit.mean() * (1 - hit.mean()) / max(hit.size, 1)):.3f}; goal {d.POWER}); "
          f"twice the estimate: {np.mean(hits2):.3f}; {none} pilots gave no size (leader not separable up to {d.MAX_ENVS}); sizes median {np.median(sizes):.0f}, "
          f"10-90% {np.quantile(sizes, 0.1):.0f}-{np.quantile(sizes, 0.9):.0f}; {time.perf_counter() - t0:.0f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--start", type=int, default=4)
    parser.add_argument("--wave", type=int, default=6)
    parser.add_argument("--max-envs", type=int, default=64)
    parser.add_argument("--pilot", type=int, default=10)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--only", choices=["sequential", "size"])
    parser.add_argument("--posterior", choices=["pooled", "jeffreys"], default="pooled",
                        help="P(learnable) of a simulated environment: sharp (the generator as prior) or vague")
    parser.add_argument("--deltas", type=float, nargs="+", default=[0.0, 0.2, 0.3, 0.4])
    args = parser.parse_args()
    if args.only != "size":
        run_sequential(args.runs, args.start, args.wave, args.max_envs, args.seeds, args.n_boot, args.posterior,
                       args.deltas)
    if args.only != "sequential":
        run_size(args.runs, args.pilot, args.seeds, args.n_boot, args.posterior)
    return 0


if __name__ == "__main__":
    sys.exit(main())
