"""Calibration of the tournament intervals: Bradley-Terry strengths, Kendall's zeta, cyclic triads and the role
correlation, through ``core.rankings.leaderboard.compute_rankings`` (the code the ``rankings`` asset runs). Issue 16.

    .venv/bin/python benchmarks/calibration_tournament.py [--envs 3 6 12 30] [--groups 100] [--n-boot 1000]

(also run by ``benchmarks/calibration.py`` unless ``--no-tournament``). Why its own generator: the main
calibration warehouse has every duel null, so its tournament is all ties. Here 5 models (the demo's count)
with known population values:

* environment e of author a: base cold rate b_e ~ U(0.05, 0.25); solver s: p_cold = b_e + K_s;
* lift L_es = H_a + C_as + u_e + v_es (u_e, v_es ~ U(-.05, .05)): H = author hint quality, C a pair term
  that puts models 0 > 1 > 2 > 0 in a cycle; ``seeds`` paired Bernoulli seeds per (e, s).

env_solver_stats rows are the mart's per-environment means; the duels are the mart's Welch rule
(``core.rankings.tournament.duels_from_stats``, equal to the dbt mart: tests/assets/marts/test_marts.py). Two truths:

* **population**: every duel decided by the sign of its population lift difference H_a + C_ab - H_b - C_ba
  (what "a's environments help more" means), BT with the same prior on that tournament, its zeta, and the
  Spearman of the true solver order (K) with the true author order (H_a + mean_b C_ab);
* **design**: the mean of the point estimate over ``--truth-draws`` independent warehouses of the same size
  (what the benchmark's decisions give on average at this scale).

The ``*_population`` figures are the simultaneous sign-set bounds (``core.rankings.population``), whose target
is the population tournament; the others are the environment-bootstrap intervals, whose target is the design's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NAMES = [f"m{i}" for i in range(5)]
K = np.array([0.10, 0.0, 0.075, 0.025, 0.05])  # solver skill
H = np.array([0.10, 0.10, 0.10, 0.30, 0.45])  # author hint quality
C = np.zeros((5, 5))
C[0, 1] = C[1, 2] = C[2, 0] = 0.15  # a's environments give b 0.15 more: 0 > 1 > 2 > 0
PRIOR = 0.5


def draw_stats(rng: np.random.Generator, envs: int, seeds: int) -> pd.DataFrame:
    """env_solver_stats rows of one 5-model warehouse."""
    rows = []
    for a, author in enumerate(NAMES):
        base = rng.uniform(0.05, 0.25, envs)
        u = rng.uniform(-0.05, 0.05, envs)
        for s, solver in enumerate(NAMES):
            p_cold = base + K[s]
            p_hint = np.clip(p_cold + H[a] + C[a, s] + u + rng.uniform(-0.05, 0.05, envs), 0, 1)
            cold = (rng.random((envs, seeds)) < p_cold[:, None]).mean(axis=1)
            hint = (rng.random((envs, seeds)) < p_hint[:, None]).mean(axis=1)
            rows.append(pd.DataFrame({"env_id": [f"{author}.e{e:02d}" for e in range(envs)], "author": author,
                                      "solver": solver, "is_self_pair": author == solver, "domain": "synthetic",
                                      "n_seeds": seeds, "p_cold": cold, "p_hint": hint, "lift": hint - cold}))
    return pd.concat(rows, ignore_index=True)


def population_truth() -> dict:
    from envduels_dagster.core.stats.ranks import spearman
    from envduels_dagster.core.stats.tournament_batch import bradley_terry_batch, triads_batch

    lift = H[:, None] + C  # population mean lift of a's environments for solver b
    diff = lift - lift.T
    score = np.where(diff > 1e-12, 1.0, np.where(diff < -1e-12, 0.0, 0.5))
    played = ~np.eye(5, dtype=bool)
    theta = bradley_terry_batch(np.where(played, score, 0.0)[None], PRIOR).theta[0]
    tri = triads_batch(score[None], played[None])
    author = np.array([np.mean([lift[a, b] for b in range(5) if b != a]) for a in range(5)])
    from envduels_dagster.core.stats.ranks import rank_desc

    ranks = rank_desc(np.round(theta, 9))  # the three cycle members tie: rank 4 each
    return {"bt": dict(zip(NAMES, theta)), "bt_rank": dict(zip(NAMES, ranks)), "zeta": float(tri.zeta[0]), "cyclic": float(tri.cyclic[0]),
            "role_rho": spearman(K, author)}


def one(rng, envs: int, seeds: int, n_boot: int, seed: int) -> tuple[pd.DataFrame, pd.Series, float]:
    from envduels_dagster.core.rankings.leaderboard import RankingConfig, compute_rankings
    from envduels_dagster.core.rankings.tournament import duels_from_stats

    stats = draw_stats(rng, envs, seeds)
    duels = duels_from_stats(stats)
    t0 = time.perf_counter()
    table, summary = compute_rankings(stats, duels, RankingConfig(n_boot=n_boot, seed=seed, bt_prior=PRIOR, n_perm=1000))
    return table.set_index("model"), summary.iloc[0], time.perf_counter() - t0


def covered(lo, hi, truth) -> np.ndarray:
    lo, hi, truth = (np.asarray(x, dtype=float) for x in (lo, hi, truth))
    return (lo <= truth + 1e-9) & (truth <= hi + 1e-9)


def size_rows(envs: int, groups: int, seeds: int, n_boot: int, truth_draws: int, seed: int) -> list[dict]:
    pop = population_truth()
    rng = np.random.default_rng(seed + 7919 * envs)
    points = [one(rng, envs, seeds, 1, 0)[:2] for _ in range(truth_draws)]  # the point does not use n_boot
    design = {"bt": {m: float(np.mean([t.loc[m, "bt_strength"] for t, _ in points])) for m in NAMES},
              "bt_rank": {m: float(np.mean([t.loc[m, "bt_rank"] for t, _ in points])) for m in NAMES},
              "zeta": float(np.nanmean([s.kendall_zeta for _, s in points])),
              "cyclic": float(np.mean([s.cyclic_triads for _, s in points])),
              "role_rho": float(np.nanmean([s.role_rho for _, s in points]))}
    runs = [one(rng, envs, seeds, n_boot, g) for g in range(groups)]
    seconds = float(np.median([r[2] for r in runs]))
    rows = []

    decided = float(np.mean([s.n_decisive_duels / s.n_duels for _, s, _ in runs]))

    def add(figure: str, lo, hi, est, truth_pop, truth_design) -> None:
        """bias: mean (estimate - truth); for BT strengths (mean 0 by construction) the shrinkage
        mean((estimate - truth) * sign(truth)), negative when strengths are pulled towards 0."""
        lo, hi, est = (np.asarray(x, dtype=float) for x in (lo, hi, est))
        shown = ~(np.isnan(lo) | np.isnan(hi))
        for name, truth in (("population", truth_pop), ("design", truth_design)):
            t = np.broadcast_to(np.asarray(truth, dtype=float), lo.shape)
            ok = covered(lo, hi, t)[shown]
            err = (est - t) * (np.sign(t) if figure.startswith("bt_strength") else 1.0)
            rows.append({"envs": envs, "figure": figure, "truth": name, "n": int(shown.size),
                         "reported": float(shown.mean()), "coverage": float(ok.mean()) if ok.size else np.nan,
                         "width": float(np.mean(hi[shown] - lo[shown])) if ok.size else np.nan,
                         "bias": float(np.nanmean(err)), "decided": decided, "seconds": seconds})

    bt = lambda col: np.concatenate([t.loc[NAMES, col].to_numpy(float) for t, _, _ in runs])  # noqa: E731
    add("bt_strength", bt("bt_strength_lower"), bt("bt_strength_upper"), bt("bt_strength"),
        np.tile([pop["bt"][m] for m in NAMES], groups), np.tile([design["bt"][m] for m in NAMES], groups))
    add("bt_rank", bt("bt_rank_lower"), bt("bt_rank_upper"), bt("bt_rank"),
        np.tile([pop["bt_rank"][m] for m in NAMES], groups), np.tile([design["bt_rank"][m] for m in NAMES], groups))
    add("bt_strength_population", bt("bt_strength_population_lower"), bt("bt_strength_population_upper"),
        bt("bt_strength"), np.tile([pop["bt"][m] for m in NAMES], groups),
        np.tile([design["bt"][m] for m in NAMES], groups))
    add("bt_rank_population", bt("bt_rank_population_lower"), bt("bt_rank_population_upper"), bt("bt_rank"),
        np.tile([pop["bt_rank"][m] for m in NAMES], groups), np.tile([design["bt_rank"][m] for m in NAMES], groups))
    s = pd.DataFrame([r[1] for r in runs])
    add("kendall_zeta", s.kendall_zeta_lower, s.kendall_zeta_upper, s.kendall_zeta, pop["zeta"], design["zeta"])
    add("cyclic_triads", s.cyclic_triads_lower, s.cyclic_triads_upper, s.cyclic_triads, pop["cyclic"],
        design["cyclic"])
    add("kendall_zeta_population", s.kendall_zeta_population_lower, s.kendall_zeta_population_upper,
        s.kendall_zeta, pop["zeta"], design["zeta"])
    add("cyclic_triads_population", s.cyclic_triads_population_lower, s.cyclic_triads_population_upper,
        s.cyclic_triads, pop["cyclic"], design["cyclic"])
    add("role_rho", s.role_rho_lower, s.role_rho_upper, s.role_rho, pop["role_rho"], design["role_rho"])
    return rows


def run(envs: list[int], groups: int, seeds: int, n_boot: int, truth_draws: int, seed: int) -> pd.DataFrame:
    rows = []
    for e in envs:
        t0 = time.perf_counter()
        rows += size_rows(e, groups, seeds, n_boot, truth_draws, seed)
        print(f"  tournament calibration, {e} envs/author: {time.perf_counter() - t0:.0f}s", flush=True)
    return pd.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", default=[3, 6, 12, 30])
    parser.add_argument("--groups", type=int, default=100, help="warehouses (intervals) per size")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--truth-draws", type=int, default=400, help="warehouses averaged for the design truth")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    df = run(args.envs, args.groups, args.seeds, args.n_boot, args.truth_draws, args.seed)
    print(f"\nnominal 95% tournament intervals; {args.groups} warehouses of 5 models per size, {args.seeds} seeds, "
          f"n_boot {args.n_boot}; goal: coverage >= 0.93")
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(df.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
