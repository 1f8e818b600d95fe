"""Calibration of the author-value intervals (``per_env``, ``per_usd``, ``per_kcall``, ``rank``) through
``core.value.author_value.author_value``, the function the ``author_value`` asset runs. Issue 16.

    .venv/bin/python benchmarks/calibration_value.py [--envs 3 6 12 30] [--groups 200] [--seeds 8]

Synthetic warehouses with known truth: one learner and three authors. Every environment slot of author a is
valid with probability V_a; a valid environment has a cold success rate c ~ Beta(1, 1) and a hinted rate
h = clip(c + L, 0, 1), L ~ U(-0.1, 0.6) + Q_a; each of ``seeds`` matched seeds is played cold (success with
probability c) and hinted (h). Writing a slot costs U(COST_a) dollars and one call. Truths (issue 42: one
definition of learnable, the training set's): per_env = V_a P(c <= 0.25 and h >= 0.5) (by Monte Carlo, 2M
draws; until issue 42 it was the per-seed rate V_a E[(1 - c) h]), per_usd = per_env / E[cost], per_kcall =
1000 per_env, rank = the order of per_usd. ``reported`` = share of rows with an interval; coverage over those.

``--mix``: the budget projection (``author_value_mix``, same function) at ``max_share`` 1.0 (the default: the
whole budget on the best-ranked author) and 0.4 (spread over the three): each row's expected learnable
environments against its truth, the true per_usd of its author times the spend the row chose, and the
``(total)`` row against the sum of those. The spend is chosen from the data; the truth is taken given it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

AUTHORS = {"a": {"valid": 0.9, "quality": 0.0, "cost": (0.01, 0.03)},
           "b": {"valid": 0.7, "quality": 0.15, "cost": (0.02, 0.06)},
           "c": {"valid": 0.8, "quality": -0.1, "cost": (0.005, 0.015)}}
LEARNER = "learner"


def rates(rng: np.random.Generator, quality: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    cold = rng.beta(1.0, 1.0, n)
    return cold, np.clip(cold + rng.uniform(-0.1, 0.6, n) + quality, 0, 1)


def truths() -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(0)
    out = {}
    for author, knobs in AUTHORS.items():
        cold, hint = rates(rng, knobs["quality"], 2_000_000)
        per_env = knobs["valid"] * float(np.mean((cold <= 0.25) & (hint >= 0.5)))
        out[author] = {"per_env": per_env, "per_usd": per_env / float(np.mean(knobs["cost"])),
                       "per_kcall": 1000 * per_env}
    order = sorted(out, key=lambda a: -out[a]["per_usd"])
    for r, author in enumerate(order, 1):
        out[author]["rank"] = float(r)
    return out


def warehouse(rng: np.random.Generator, envs: int, seeds: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    env_rows, episodes = [], []
    for author, knobs in AUTHORS.items():
        valid = rng.random(envs) < knobs["valid"]
        cold, hint = rates(rng, knobs["quality"], envs)
        for i in range(envs):
            env_id = f"{author}.e{i:02d}"
            env_rows.append({"env_id": env_id, "author": author, "parent_env_id": None, "round": 0,
                             "valid": bool(valid[i]), "author_cost_usd": float(rng.uniform(*knobs["cost"])),
                             "author_calls": 1, "author_prompt_tokens": 0, "author_completion_tokens": 0})
            if not valid[i]:
                continue
            for cond, p in (("cold", cold[i]), ("hinted", hint[i])):
                y = rng.random(seeds) < p
                episodes.append(pd.DataFrame({"env_id": env_id, "author": author, "solver": LEARNER, "round": 0,
                                              "condition": cond, "seed": np.arange(seeds),
                                              "status": np.where(y, "success", "failure"), "model_calls": 1,
                                              "cost_usd": 0.0}))
    env_rows.append({"env_id": f"{LEARNER}.e00", "author": LEARNER, "parent_env_id": None, "round": 0,
                     "valid": False, "author_cost_usd": 0.01, "author_calls": 1, "author_prompt_tokens": 0,
                     "author_completion_tokens": 0})
    return pd.DataFrame(env_rows), pd.concat(episodes, ignore_index=True)


def value_tables(envs: int, groups: int, seeds: int, n_boot: int, rng_seed: int, **options):
    """``author_value``'s (table, mix) on each of ``groups`` synthetic warehouses of ``envs`` slots per author."""
    from envduels_dagster.core.value.author_value import ValueConfig, author_value

    rng = np.random.default_rng(rng_seed)
    for g in range(groups):
        e, p = warehouse(rng, envs, seeds)
        yield author_value(e, p, LEARNER, ValueConfig(n_boot=n_boot, seed=g, **options))


def covered(lo: pd.Series, hi: pd.Series, truth: pd.Series, tol: float = 1e-12) -> tuple[pd.Series, pd.Series]:
    """(rows with an interval, whether each of those holds its truth)."""
    lo, hi = lo.astype(float), hi.astype(float)
    shown = lo.notna() & hi.notna()
    return shown, (lo[shown] <= truth[shown] + tol) & (truth[shown] <= hi[shown] + tol)


def run_mix(sizes: list[int], groups: int, seeds: int, n_boot: int, shares=(1.0, 0.4)) -> pd.DataFrame:
    truth = truths()
    rows = []
    for envs in sizes:
        for share in shares:
            t0 = time.perf_counter()
            mixes = []
            for _, mix in value_tables(envs, groups, seeds, n_boot, 2000 + envs, max_share=share):
                if mix.empty:
                    continue
                authors = mix[mix["author"] != "(total)"]
                true = authors["author"].map({a: v["per_usd"] for a, v in truth.items()}) * authors["budget"]
                mix = mix.assign(truth=list(true) + [float(true.sum())], kind=["author"] * len(authors) + ["total"])
                mixes.append(mix)
            if not mixes:  # below the minimum sample no author is ranked: no projection at all
                rows.append({"envs": envs, "max_share": share, "row": "none (no author ranked)", "n": 0})
                continue
            m = pd.concat(mixes, ignore_index=True)
            for kind in ("author", "total"):
                k = m[m["kind"] == kind]
                lo, hi = k["expected_lower"].astype(float), k["expected_upper"].astype(float)
                shown, ok = covered(lo, hi, k["truth"], tol=1e-9)
                rows.append({"envs": envs, "max_share": share, "row": kind, "n": len(k),
                             "reported": float(shown.mean()) if len(k) else np.nan,
                             "coverage": float(ok.mean()) if shown.any() else np.nan,
                             "rel_width": float(((hi - lo) / k["truth"])[shown].mean()) if shown.any() else np.nan,
                             "seconds": round(time.perf_counter() - t0, 1)})
        print(f"  mix, {envs} slots per author: done", flush=True)
    return pd.DataFrame(rows)


def run(sizes: list[int], groups: int, seeds: int, n_boot: int) -> pd.DataFrame:
    truth = truths()
    rows = []
    for envs in sizes:
        t0 = time.perf_counter()
        t = pd.concat([table[table["author"].isin(AUTHORS)]
                       for table, _ in value_tables(envs, groups, seeds, n_boot, 1000 + envs, min_envs=3)],
                      ignore_index=True)
        for fig in ("per_env", "per_usd", "per_kcall", "rank"):
            lo, hi = t[f"{fig}_lower"].astype(float), t[f"{fig}_upper"].astype(float)
            true = t["author"].map({a: v[fig] for a, v in truth.items()})
            shown, ok = covered(lo, hi, true)
            est = t[fig].astype(float)
            rows.append({"envs": envs, "figure": fig, "n": len(t), "reported": float(shown.mean()),
                         "coverage": float(ok.mean()) if shown.any() else np.nan,
                         "width": float((hi - lo)[shown].mean()) if shown.any() else np.nan,
                         "bias": float((est - true).mean()) if fig != "rank" else np.nan,
                         "seconds": round(time.perf_counter() - t0, 1)})
        print(f"  {envs} slots per author: {time.perf_counter() - t0:.0f}s", flush=True)
    return pd.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", default=[3, 6, 12, 30], help="environment slots per author")
    parser.add_argument("--groups", type=int, default=200, help="warehouses per size")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--n-boot", type=int, default=2000)
    parser.add_argument("--mix", action="store_true", help="only the budget projection (author_value_mix)")
    args = parser.parse_args()
    if args.mix:
        df = run_mix(args.envs, args.groups, args.seeds, args.n_boot)
        print(f"\nnominal 95% intervals of author_value_mix; {args.groups} warehouses per size, {args.seeds} seeds, "
              f"n_boot {args.n_boot}; goal: coverage >= 0.93")
        print(df.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        return 0
    truth = truths()
    print("truth: " + "; ".join(f"{a}: per_env {v['per_env']:.3f}, per_usd {v['per_usd']:.2f}, rank {v['rank']:.0f}"
                                for a, v in truth.items()))
    df = run(args.envs, args.groups, args.seeds, args.n_boot)
    print(f"\nnominal 95% intervals of author_value; {args.groups} warehouses per size (3 authors each), "
          f"{args.seeds} seeds, n_boot {args.n_boot}; goal: coverage >= 0.93")
    print(df.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
