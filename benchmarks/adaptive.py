"""Benchmark: adaptive seed sampling (core/play/adaptive.py) against fixed 4-seed sampling.

    .venv/bin/python benchmarks/adaptive.py                      # the demo configuration and a larger run
    .venv/bin/python benchmarks/adaptive.py --runs demo --confidence 0.9 --max-seeds 8 --reference-seeds 16

Runs (simulated models, played in-process through the real Gateway and sandbox):
  demo   5 models (oracle ... novice), 3 environments per author: what `make demo` plays
  large  the same 5 models, 12 environments per author (4x the environments)

Every model plays every valid environment (self pairs included, as the pipeline does).
Episodes are deterministic, so each (environment, solver, seed, condition) is played once
and shared: fixed sampling uses seeds 0-3, the adaptive policy (``play_env_adaptive``, the
code ``duel_episodes`` runs) asks for seeds one at a time and stops when its verdict is
settled, and a reference of ``--reference-seeds`` seeds estimates the truth. Each design is
charged the solver calls (model calls) of exactly the episodes it uses.

Prints, per run: solver calls of fixed and adaptive sampling and the saving, agreement of
training-set membership (the pipeline's rule: fails every cold seed, passes >= half the
hinted ones) between adaptive and fixed, over all (environment, solver) and over peer
pairs only, agreement of the category, how often each design matches the
reference, and the lift bias of each design against the reference (every seed the adaptive sampler played,
as the marts averaged them before, against only its committed seeds, episodes.sampling = 'fixed', as now). Goal: >= 35% fewer solver calls with >= 95% membership agreement.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROFILES = ["oracle", "expert", "journeyman", "apprentice", "novice"]
RUNS = {"demo": 3, "large": 12}


async def collect(gateway, names: list[str], envs_per_author: int, seeds_needed: int, concurrency: int):
    """Author environments, then play every (env, solver) on seeds 0..seeds_needed-1, memoized."""
    from envduels_dagster.core.authoring.prompts import author_environments
    from envduels_dagster.core.play.episode import play_episode

    envs = []
    for author in names:
        envs += [e for e in await author_environments(gateway, author, envs_per_author, [0, 1, 2, 3]) if e.valid]
    sem = asyncio.Semaphore(concurrency)
    memo: dict[tuple, asyncio.Task] = {}

    async def episode(env, solver, seed, condition):
        async with sem:
            return await play_episode(gateway, solver, env, seed, condition)

    def play(env, solver, seed, condition):
        key = (env.env_id, solver, seed, condition)
        if key not in memo:
            memo[key] = asyncio.ensure_future(episode(env, solver, seed, condition))
        return memo[key]

    # Everything any design may use, in one concurrent sweep.
    await asyncio.gather(*(play(env, solver, seed, cond) for env in envs for solver in names
                           for seed in range(seeds_needed) for cond in ("cold", "hinted")))
    return envs, {k: t.result() for k, t in memo.items()}


def evaluate(envs, names, results, policy, reference_seeds: int):
    from envduels_dagster.core.play.adaptive import category, is_member, play_env_adaptive

    rows = []
    for env in envs:
        for solver in names:
            def outcome(seeds):
                recs = [(results[(env.env_id, solver, s, "cold")], results[(env.env_id, solver, s, "hinted")])
                        for s in seeds]
                done = [(c, h) for c, h in recs if c.status != "incomplete" and h.status != "incomplete"]
                cold = sum(c.status == "success" for c, _ in done)
                hint = sum(h.status == "success" for _, h in done)
                calls = sum(c.model_calls + h.model_calls for c, h in recs)
                return cold, hint, len(done), calls

            def lift(pairs):
                done = [(c, h) for c, h in pairs if c.status != "incomplete" and h.status != "incomplete"]
                return (sum((h.status == "success") - (c.status == "success") for c, h in done) / len(done)
                        if done else float("nan"))

            fc, fh, fn, fcalls = outcome(range(4))
            rc, rh, rn, _ = outcome(range(reference_seeds))

            async def play_seed(seed, env=env, solver=solver):
                return results[(env.env_id, solver, seed, "cold")], results[(env.env_id, solver, seed, "hinted")]

            recs, decision = asyncio.run(play_env_adaptive(play_seed, [0, 1, 2, 3], policy, env.env_id))
            played = list(zip(recs[0::2], recs[1::2]))
            reference = [(results[(env.env_id, solver, s, "cold")], results[(env.env_id, solver, s, "hinted")])
                         for s in range(reference_seeds)]
            rows.append({
                # lift of the (environment, solver): reference seeds (the truth's estimate), fixed 4 seeds, every
                # seed the sampler played (what the marts used to average), its committed seeds only (what the
                # marts average now: episodes.sampling = 'fixed')
                "ref_lift": lift(reference), "fixed_lift": lift(reference[:4]), "adaptive_lift_all": lift(played),
                "adaptive_lift_committed": lift([(c, h) for c, h in played if c.sampling == "fixed"]),
                "self": env.author == solver,
                "fixed_calls": fcalls, "adaptive_calls": sum(r.model_calls for r in recs),
                "seeds": len(decision.seeds_played),
                "fixed_member": is_member(fc, fh, fn, policy.max_cold, policy.min_hint),
                "adaptive_member": decision.member,
                "ref_member": is_member(rc, rh, rn, policy.max_cold, policy.min_hint),
                "fixed_category": category(fc, fh), "adaptive_category": decision.category,
            })
    return rows


def report(label: str, rows: list[dict]) -> dict:
    def share(rs, f):
        return sum(f(r) for r in rs) / len(rs) if rs else float("nan")

    fixed = sum(r["fixed_calls"] for r in rows)
    adaptive = sum(r["adaptive_calls"] for r in rows)
    peers = [r for r in rows if not r["self"]]
    seeds_hist: dict[int, int] = {}
    for r in rows:
        seeds_hist[r["seeds"]] = seeds_hist.get(r["seeds"], 0) + 1
    out = {
        "pairs": len(rows),
        "fixed_calls": fixed, "adaptive_calls": adaptive, "saved": 1 - adaptive / fixed if fixed else 0.0,
        "agree_member": share(rows, lambda r: r["fixed_member"] == r["adaptive_member"]),
        "agree_member_peers": share(peers, lambda r: r["fixed_member"] == r["adaptive_member"]),
        "agree_category": share(rows, lambda r: r["fixed_category"] == r["adaptive_category"]),
        "members_fixed": sum(r["fixed_member"] for r in peers),
        "members_adaptive": sum(r["adaptive_member"] for r in peers),
        "fixed_vs_ref": share(rows, lambda r: r["fixed_member"] == r["ref_member"]),
        "adaptive_vs_ref": share(rows, lambda r: r["adaptive_member"] == r["ref_member"]),
    }
    print(f"[{label}] (environment, solver) pairs={out['pairs']}  seeds played: "
          + ", ".join(f"{k}:{v}" for k, v in sorted(seeds_hist.items())))
    print(f"[{label}] solver calls fixed-4={fixed} adaptive={adaptive} saved={out['saved']:.1%}")
    print(f"[{label}] training-set membership agreement with fixed-4: {out['agree_member']:.1%} "
          f"(peer pairs {out['agree_member_peers']:.1%}; members among peer pairs fixed={out['members_fixed']} "
          f"adaptive={out['members_adaptive']}); category agreement {out['agree_category']:.1%}")
    print(f"[{label}] membership matching the reference: fixed-4 {out['fixed_vs_ref']:.1%}, "
          f"adaptive {out['adaptive_vs_ref']:.1%}")
    import numpy as np

    ref = np.array([r["ref_lift"] for r in peers])
    near0 = np.abs(ref) <= 0.1
    for col, what in (("fixed_lift", "fixed 4 seeds"), ("adaptive_lift_all", "adaptive, every seed played (before)"),
                      ("adaptive_lift_committed", "adaptive, committed seeds only (marts now)")):
        d = np.array([r[col] for r in peers]) - ref
        out[f"bias_{col}"] = float(np.nanmean(d))
        se = np.nanstd(d, ddof=1) / np.sqrt(np.sum(~np.isnan(d)))
        print(f"[{label}] lift bias vs the {len(ref)} peer pairs' reference: {what}: mean {np.nanmean(d):+.3f} "
              f"(SE {se:.3f}); "
              f"where the reference lift is within 0.1 of 0 ({int(near0.sum())} pairs): {np.nanmean(d[near0]):+.3f}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", choices=sorted(RUNS), default=["demo", "large"])
    parser.add_argument("--confidence", type=float, default=None, help="default: AdaptivePolicy's")
    parser.add_argument("--max-seeds", type=int, default=None, help="default: AdaptivePolicy's")
    parser.add_argument("--target", choices=("membership", "category"), default="membership")
    parser.add_argument("--reference-seeds", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()

    from dataclasses import replace

    from envduels_dagster.core.models import Gateway
    from envduels_dagster.core.models.call_cache import CallCache
    from envduels_dagster.core.models.registry import load_registry
    from envduels_dagster.core.play.adaptive import AdaptivePolicy

    policy = AdaptivePolicy(target=args.target)
    if args.confidence is not None:
        policy = replace(policy, confidence=args.confidence)
    if args.max_seeds is not None:
        policy = replace(policy, max_seeds=args.max_seeds)
    print(f"policy: {policy}")
    print(f"machine: nproc={os.cpu_count()} loadavg={os.getloadavg()[0]:.2f}")
    workdir = Path(tempfile.mkdtemp(prefix="envduels-adaptive-"))
    registry_file = workdir / "models.yaml"
    registry_file.write_text("models:\n" + "".join(f"  - name: {p}\n    model: envduels-sim/{p}\n" for p in PROFILES))
    registry = load_registry(registry_file)
    ok = True
    for run in args.runs:
        t0 = time.perf_counter()
        gateway = Gateway(registry, CallCache(workdir / f"{run}.sqlite"))
        seeds_needed = max(args.reference_seeds, policy.max_seeds, 4)
        envs, results = asyncio.run(collect(gateway, PROFILES, RUNS[run], seeds_needed, args.concurrency))
        rows = evaluate(envs, PROFILES, results, policy, args.reference_seeds)
        print(f"[{run}] {len(PROFILES)} models, {RUNS[run]} environments per author, {len(envs)} valid; "
              f"{len(results)} episodes played in {time.perf_counter() - t0:.0f}s")
        out = report(run, rows)
        ok &= out["saved"] >= 0.35 and out["agree_member"] >= 0.95
    print(f"goal (>= 35% fewer solver calls, >= 95% membership agreement): {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
