"""Coverage of the published per-row lift interval of ``training_set`` (lift_lower/lift_upper), on the rows
the product publishes (the admitted rows) and, for comparison, on every peer row.

    PYTHONPATH=. .venv/bin/python benchmarks/calibration_training_interval.py \
        [--envs 3 6 10 12] [--models 5] [--seeds 8] [--warehouses 60] [--generator mixture lift]
        [--interval published|fitted]

Why: docs/STATISTICS.md's rule is coverage >= 0.93 wherever an interval is reported; the relevant
population is what is published, and ``training_set`` publishes only admitted rows (selected on the same
data, so a posterior interval is calibrated on them only if the prior is right). Each warehouse is one
``models``-model tournament (every model authors ``envs`` environments and solves the others'), so the
prior is fitted on models * envs * (models - 1) peer rows (200 at the demo's 5 models x 10 environments).
Every learner's set goes through ``core.training.training_set.build_training_set`` (what the ``training_set`` asset
runs). Generators:

* ``lift``: the tournament of ``calibration.py`` widened to ``models`` models (base cold rate U(.05, .30) +
  author shift, + solver skill .05 a step, hinted = cold + .2 + an environment and a row effect): truly
  learnable rows are rare and sit on the region's edge;
* ``mixture``: each (environment, solver) row's rates drawn from ``calibration.MIXTURE`` (wasted / noise /
  learnable / borderline clusters), independently.

Printed per generator and size: rows published, the share whose interval was withheld ("insufficient
data"), coverage of the reported intervals on admitted rows (with its binomial SE) and on all peer rows,
mean width, wall time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration import BASE, DELTA, MIXTURE  # noqa: E402


def _episodes(names, rows, pc, ph, seeds, rng) -> pd.DataFrame:
    """Episode rows (paired seeds) for (env_id, author, solver) ``rows`` with true rates ``pc``/``ph``."""
    frames = []
    env = np.repeat([r[0] for r in rows], seeds)
    author = np.repeat([r[1] for r in rows], seeds)
    solver = np.repeat([r[2] for r in rows], seeds)
    seed = np.tile(np.arange(seeds), len(rows))
    for cond, p in (("cold", pc), ("hinted", ph)):
        y = rng.random((len(rows), seeds)) < np.asarray(p)[:, None]
        frames.append(pd.DataFrame({"env_id": env, "author": author, "solver": solver, "condition": cond,
                                    "seed": seed, "status": np.where(y.ravel(), "success", "failure")}))
    return pd.concat(frames, ignore_index=True)


def warehouse(generator: str, rng: np.random.Generator, models: int, envs: int, seeds: int):
    """(episodes, truth) of one ``models``-model tournament; truth indexed by (env_id, solver)."""
    names = [f"m{i}" for i in range(models)]
    skill = 0.05 * np.arange(models)
    shift = np.where(np.arange(models) % 2 == 1, 0.05, 0.0)
    rows, pc, ph = [], [], []
    for a, author in enumerate(names):
        base = rng.uniform(*BASE, envs) + shift[a]
        u = rng.uniform(-0.1, 0.1, envs)
        for s, solver in enumerate(names):
            for e in range(envs):
                rows.append((f"{author}.e{e:02d}", author, solver))
                if generator == "lift":
                    c = base[e] + skill[s]
                    pc.append(c)
                    ph.append(float(np.clip(c + DELTA + u[e] + rng.uniform(-0.05, 0.05), 0, 1)))
                else:
                    k = rng.choice(len(MIXTURE), p=[m[0] for m in MIXTURE])
                    c, h = rng.uniform(*MIXTURE[k][1]), rng.uniform(*MIXTURE[k][2])
                    pc.append(c)
                    ph.append(max(h, c) if k == 0 else h)
    truth = pd.DataFrame(rows, columns=["env_id", "author", "solver"]).assign(true_cold=pc, true_hint=ph)
    return _episodes(names, rows, pc, ph, seeds, rng), truth.set_index(["env_id", "solver"])


def env_table(episodes: pd.DataFrame, seeds: int) -> pd.DataFrame:
    ids = episodes["env_id"].unique()
    return pd.DataFrame({"env_id": ids, "author": [i.split(".e")[0] for i in ids], "domain": "synthetic",
                         "class_name": "Env", "max_turns": 6, "source_sha256": "0" * 64, "hint": "",
                         "benchmark_seeds": [list(range(seeds))] * len(ids), "valid": True, "parent_env_id": None})


def measure(generator: str, models: int, envs: int, seeds: int, warehouses: int, seed: int) -> dict:
    """Coverage of the published interval on admitted rows (through build_training_set) and on all rows."""
    from envduels_dagster.core.stats import env_solver_stats
    from envduels_dagster.core.stats import joint_admission as ja
    from envduels_dagster.core.training.training_set import build_training_set

    t0 = time.perf_counter()
    adm_cov, adm_shown, all_cov, all_shown, widths, prior_rows = [], 0, [], 0, [], []
    adm_total = all_total = 0
    for w in range(warehouses):
        rng = np.random.default_rng([seed, envs, seeds, w, 1 if generator == "lift" else 2])
        episodes, truth = warehouse(generator, rng, models, envs, seeds)
        envs_df = env_table(episodes, seeds)
        for learner in sorted(episodes["solver"].unique()):
            ts = build_training_set(learner, episodes, envs_df)
            rows = ts.rows
            prior_rows.append(ts.prior_rows)
            adm_total += len(rows)
            if len(rows):
                t = truth.loc[[(e, learner) for e in rows["env_id"]]]
                lift = (t["true_hint"] - t["true_cold"]).to_numpy()
                lo, hi = rows["lift_lower"].to_numpy(float), rows["lift_upper"].to_numpy(float)
                shown = ~(np.isnan(lo) | np.isnan(hi))
                adm_shown += int(shown.sum())
                adm_cov += list((lo[shown] <= lift[shown] + 1e-12) & (lift[shown] <= hi[shown] + 1e-12))
                widths += list(hi[shown] - lo[shown])
        # every peer row, the same estimator on the same prior (what the set would publish at threshold 0)
        stats = env_solver_stats(episodes)
        peer = stats[stats["author"] != stats["solver"]].reset_index(drop=True)
        prior = ja.fit_joint_prior(*ja.counts(peer))
        lo, hi = ja.robust_lift_interval(prior, *ja.counts(peer))
        t = truth.loc[list(zip(peer["env_id"], peer["solver"]))]
        lift = (t["true_hint"] - t["true_cold"]).to_numpy()
        shown = ~(np.isnan(lo) | np.isnan(hi))
        all_total += len(peer)
        all_shown += int(shown.sum())
        all_cov += list((lo[shown] <= lift[shown] + 1e-12) & (lift[shown] <= hi[shown] + 1e-12))
    cov = float(np.mean(adm_cov)) if adm_cov else float("nan")
    return {"generator": generator, "envs": envs, "seeds": seeds, "prior_rows": int(np.median(prior_rows)),
            "admitted": adm_total, "shown": adm_shown, "coverage_admitted": cov,
            "se": float(np.sqrt(cov * (1 - cov) / max(len(adm_cov), 1))) if adm_cov else float("nan"),
            "width": float(np.mean(widths)) if widths else float("nan"), "all_rows": all_total,
            "all_shown": all_shown, "coverage_all": float(np.mean(all_cov)) if all_cov else float("nan"),
            "seconds": time.perf_counter() - t0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", default=[3, 6, 10, 12])
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--seeds", type=int, nargs="+", default=[8])
    parser.add_argument("--warehouses", type=int, default=60)
    parser.add_argument("--generator", nargs="+", default=["mixture", "lift"], choices=["mixture", "lift"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--interval", choices=["published", "fitted"], default="published",
                        help="fitted: publish the fitted-prior posterior interval alone (the interval until 2 Dec "
                             "2026), for the before/after comparison")
    args = parser.parse_args()
    if args.interval == "fitted":
        from envduels_dagster.core.stats import joint_admission as ja

        ja.robust_lift_interval = ja.joint_lift_interval  # build_training_set looks it up at call time
    print(f"training_set lift interval ({args.interval}) coverage; {args.warehouses} warehouses of {args.models} models per cell, "
          "nominal 95%, goal >= 0.93 on the published (admitted) rows", flush=True)
    out = []
    for generator in args.generator:
        for seeds in args.seeds:
            for envs in args.envs:
                r = measure(generator, args.models, envs, seeds, args.warehouses, args.seed)
                out.append(r)
                print(f"  {generator:7s} {envs:2d} envs x {seeds} seeds (prior {r['prior_rows']} rows): admitted "
                      f"{r['admitted']}, interval shown {r['shown']}, coverage {r['coverage_admitted']:.3f} "
                      f"(SE {r['se']:.3f}), width {r['width']:.3f}; all rows {r['all_shown']}/{r['all_rows']} "
                      f"shown, coverage {r['coverage_all']:.3f}; {r['seconds']:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
