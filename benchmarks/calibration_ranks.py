"""Calibration of the rankings' bootstrap rank intervals (solver_rank, author_rank) and, beside them, the author
score's bootstrap and t intervals, through ``core.rankings.leaderboard.compute_rankings``. Issue 16.

    .venv/bin/python benchmarks/calibration_ranks.py [--envs 3 6 12 30] [--groups 40] [--n-boot 500]

Why not the main generator as it is: in ``benchmarks/calibration.py`` every author's hints lift by the same 0.2,
so author ranks all tie. Here the same 4-model tournaments (``calibration.tournament``: base rates, solver skill
0 / .05 / .10 / .15, author shifts) with author hint quality 0 / .1 / .2 / .3 on top of a lift of 0.1: the true author score (mean peer lift) is
0.1 + quality, the true solver score as in calibration.py, so both rank orders are known and strict.

``rankings.RANK_MIN_ENVS`` is set from the rank rows. Every interval is measured, published or not
(``compute_rankings(..., withhold_uncalibrated=False)``); ``reported`` is the share that had one at all.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

QUALITY = np.array([0.0, 0.1, 0.2, 0.3])
LIFT = 0.1  # author a's hints lift by LIFT + QUALITY[a]: calibration.DELTA + (LIFT - DELTA + QUALITY[a])


def run(envs_list: list[int], groups: int, seeds: int, n_boot: int, domains: int = 1) -> pd.DataFrame:
    import calibration as cal

    from envduels_dagster.core.rankings import leaderboard as rk
    from envduels_dagster.core.rankings.tournament import duels_from_stats
    from envduels_dagster.core.stats import env_solver_stats
    from envduels_dagster.core.stats.ranks import rank_desc

    rows = []
    for envs in envs_list:
        rng = np.random.default_rng(envs)
        hits: dict[str, list] = {}
        for g in range(groups):
            episodes, _ = cal.tournament(rng, g, envs, seeds, hint_shift=LIFT - cal.DELTA + QUALITY)
            stats = env_solver_stats(episodes)
            if domains > 1:  # each environment in one of `domains` domains at random (rates do not depend on it)
                ids = sorted(stats["env_id"].unique())
                stats["domain"] = stats["env_id"].map(dict(zip(ids, rng.integers(0, domains, len(ids)).astype(str))))
            stats["is_self_pair"] = stats["author"] == stats["solver"]
            config = rk.RankingConfig(n_boot=n_boot, seed=g, n_perm=100, withhold_uncalibrated=False)
            table, _ = rk.compute_rankings(stats, duels_from_stats(stats), config)
            table = table.sort_values("model").reset_index(drop=True)
            solver_truth = cal.truths(list(table["model"]))["solver_score"]
            truth = {"solver_score": table["model"].map(solver_truth).to_numpy(float),
                     "author_score": LIFT + QUALITY}
            truth["solver_rank"] = rank_desc(truth["solver_score"])
            truth["author_rank"] = rank_desc(truth["author_score"])
            for fig, lo, hi in (("solver_rank", "solver_rank_lower", "solver_rank_upper"),
                                ("author_rank", "author_rank_lower", "author_rank_upper"),
                                ("solver_score t", "solver_score_ci_lower", "solver_score_ci_upper"),
                                ("author_score bootstrap", "author_score_lower", "author_score_upper"),
                                ("author_score t", "author_score_ci_lower", "author_score_ci_upper")):
                t = truth[fig.split()[0]]
                ok = (table[lo].to_numpy(float) <= t + 1e-9) & (t <= table[hi].to_numpy(float) + 1e-9)
                shown = table[lo].notna().to_numpy()
                hits.setdefault(fig, []).append((ok[shown], (table[hi] - table[lo]).to_numpy(float)[shown],
                                                 shown))
        for fig, parts in hits.items():
            ok = np.concatenate([p[0] for p in parts])
            rows.append({"envs": envs, "figure": fig, "n": int(sum(len(p[2]) for p in parts)),
                         "reported": float(np.mean(np.concatenate([p[2] for p in parts]))),
                         "coverage": float(ok.mean()) if ok.size else np.nan,
                         "width": float(np.mean(np.concatenate([p[1] for p in parts]))) if ok.size else np.nan})
        print(f"  {envs} envs/author done", flush=True)
    return pd.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", default=[3, 6, 12, 30])
    parser.add_argument("--groups", type=int, default=40, help="4-model warehouses per size")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--n-boot", type=int, default=500)
    parser.add_argument("--domains", type=int, default=1,
                        help="spread the environments over this many domains at random (the solver score's strata)")
    args = parser.parse_args()
    df = run(args.envs, args.groups, args.seeds, args.n_boot, args.domains)
    print(f"\nnominal 95% intervals; {args.groups} four-model warehouses per size, {args.seeds} seeds, "
          f"n_boot {args.n_boot}; goal: coverage >= 0.93")
    print(df.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
