"""Calibration of the skill -> improvement interval (``core.rankings.progress.skill_change_interval``; issue 16).

    .venv/bin/python benchmarks/calibration_progress.py [--envs 3 5 8 16] [--reps 200] [--n-boot 400]

Why synthetic: only there is the population rho known. Each replicate is one two-round tournament of 6 models
(every model authors and solves) from ``tests/helpers/synthetic_progress.py``: the true hint change of each
author is planted (population rho with solver skill -0.886), the true design change is planted through the
child's peer spread and computed by Monte Carlo (rho +0.257). Printed per size (environments = lineage pairs per
author): coverage of the population rho by the published interval (share of replicates whose interval contains
it), its mean width, the share withheld and the mean point rho; n = replicates with an interval.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def coverage(envs: int, reps: int, n_boot: int, seed: int = 0, bands=None, gain_scale: float = 1.0
             ) -> dict[str, dict[str, float]]:
    """Coverage as published; with ``bands`` (reliability cut-offs) also the coverage of the interval computed
    regardless of the reliability and pair rules, among replicates whose reliability is at least each cut-off."""
    from envduels_dagster.core.rankings import progress as prog
    from envduels_dagster.core.rankings.progress import progress_table, skill_change_interval, skill_vs_change
    from tests.helpers.synthetic_progress import HINT_GAIN, population_rho, two_round_tournament

    truth = population_rho()
    hits = {k: [] for k in truth}
    widths = {k: [] for k in truth}
    points = {k: [] for k in truth}
    withheld = {k: 0 for k in truth}
    banded: dict[str, list[tuple[float, bool]]] = {k: [] for k in truth}
    for r in range(reps):
        e, eps = two_round_tournament(np.random.default_rng(seed * 100003 + envs * 1009 + r), envs,
                                      hint_gain=HINT_GAIN * gain_scale)
        progress = progress_table(e, eps)
        rho = skill_vs_change(progress)
        ci = skill_change_interval(e, eps, progress=progress, n_boot=n_boot, seed=r)
        if bands is not None:
            rules = prog.MIN_RELIABILITY, prog.MIN_PAIRS
            prog.MIN_RELIABILITY, prog.MIN_PAIRS = -np.inf, 0
            raw = skill_change_interval(e, eps, progress=progress, n_boot=n_boot, seed=r)
            prog.MIN_RELIABILITY, prog.MIN_PAIRS = rules
            for k in truth:
                banded[k].append((raw[f"skill_vs_{k}_change_reliability"], bool(
                    raw[f"skill_vs_{k}_change_lower"] - 1e-12 <= truth[k] <= raw[f"skill_vs_{k}_change_upper"] + 1e-12)))
        for k in truth:
            lo, hi = ci[f"skill_vs_{k}_change_lower"], ci[f"skill_vs_{k}_change_upper"]
            points[k].append(rho[f"skill_vs_{k}_change_rho"])
            if ci[f"skill_vs_{k}_change_reason"]:
                withheld[k] += 1
                continue
            hits[k].append(lo - 1e-12 <= truth[k] <= hi + 1e-12)
            widths[k].append(hi - lo)
    return {k: {"truth": truth[k], "coverage": float(np.mean(hits[k])) if hits[k] else float("nan"),
                "n": len(hits[k]), "width": float(np.mean(widths[k])) if widths[k] else float("nan"),
                "withheld": withheld[k] / reps, "mean_rho": float(np.nanmean(points[k])),
                "bands": {b: (float(np.mean([c for rel, c in banded[k] if rel >= b])) if any(rel >= b for rel, _ in banded[k])
                              else float("nan"), sum(rel >= b for rel, _ in banded[k])) for b in (bands or [])},
                "mean_reliability": float(np.nanmean([rel for rel, _ in banded[k]])) if banded[k] else float("nan")}
            for k in truth}


def per_author_coverage(envs: int, reps: int, seed: int = 0) -> dict[str, dict[str, float]]:
    """Coverage of each author's published change interval (``progress_table``: a t interval over its lineage
    pairs) of its true change: hint = the planted HINT_GAIN, design = ``design_truth`` (Monte Carlo)."""
    from envduels_dagster.core.rankings.progress import progress_table
    from tests.helpers.synthetic_progress import HINT_GAIN, design_truth, two_round_tournament

    truth = {"hint": HINT_GAIN, "design": design_truth()}
    out: dict[str, dict[str, list]] = {k: {"hit": [], "width": [], "shown": []} for k in truth}
    for r in range(reps):
        e, eps = two_round_tournament(np.random.default_rng(seed * 100003 + envs * 1009 + r), envs)
        table = progress_table(e, eps).sort_values("author")
        for k, true in truth.items():
            lo, hi = table[f"{k}_change_lower"].to_numpy(float), table[f"{k}_change_upper"].to_numpy(float)
            shown = ~np.isnan(lo)
            out[k]["shown"] += list(shown)
            out[k]["hit"] += list(((lo <= true + 1e-12) & (true <= hi + 1e-12))[shown])
            out[k]["width"] += list((hi - lo)[shown])
    return {k: {"coverage": float(np.mean(v["hit"])) if v["hit"] else float("nan"), "n": len(v["hit"]),
                "reported": float(np.mean(v["shown"])), "width": float(np.mean(v["width"])) if v["width"] else
                float("nan")} for k, v in out.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", default=[3, 5, 8, 16])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--n-boot", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gain-scale", type=float, default=1.0,
                        help="multiply the planted hint gains (same ranks, same population rho; smaller = weaker signal)")
    parser.add_argument("--bands", type=float, nargs="*", default=None,
                        help="also print the coverage regardless of the rules above these reliabilities")
    parser.add_argument("--per-author", action="store_true",
                        help="instead: coverage of each author's design / hint change interval (table authoring_progress)")
    args = parser.parse_args()
    if args.per_author:
        print(f"per-author change intervals (t over lineage pairs): 6 authors, 4 seeds, {args.reps} replicates a size")
        print("| pairs per author | change | coverage (n) | reported | mean width |")
        print("|---|---|---|---|---|")
        for envs in args.envs:
            for k, row in per_author_coverage(envs, args.reps, args.seed).items():
                print(f"| {envs} | {k} | {row['coverage']:.3f} ({row['n']}) | {row['reported']:.3f} | "
                      f"{row['width']:.3f} |", flush=True)
        return 0
    print(f"skill -> improvement interval: 6 authors, 4 seeds, {args.reps} replicates a size, n_boot {args.n_boot}, "
          f"hint gains x {args.gain_scale:g}")
    print("| pairs per author | change | population rho | coverage (n) | mean width | withheld | mean rho |")
    print("|---|---|---|---|---|---|---|")
    for envs in args.envs:
        t0 = time.perf_counter()
        for k, row in coverage(envs, args.reps, args.n_boot, args.seed, args.bands, args.gain_scale).items():
            bands = " ".join(f"rel>={b}: {c:.3f} ({n})" for b, (c, n) in row["bands"].items())
            print(f"| {envs} | {k} | {row['truth']:+.3f} | {row['coverage']:.3f} ({row['n']}) | {row['width']:.2f} "
                  f"| {row['withheld']:.2f} | {row['mean_rho']:+.2f} |"
                  + (f" mean reliability {row['mean_reliability']:.2f}; regardless of the rules: {bands}" if bands else ""),
                  flush=True)
        print(f"<!-- {envs} pairs: {time.perf_counter() - t0:.0f} s -->", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
