"""Benchmark: the plan (``envduels plan``'s figures, made before anything runs) against what a run used, on
simulated models served over HTTP by ``envduels serve-sim``.

    .venv/bin/python benchmarks/plan_vs_actual.py --config learner --envs 8 --seeds 4
    .venv/bin/python benchmarks/plan_vs_actual.py --config full --envs 8 --seeds 4 --rounds 1

Configs: ``learner``: 3 author-only models (oracle, expert, journeyman) x 1 solver-only learner (apprentice),
3 pairs; ``full``: the five simulated models with both roles, 25 pairs. Every model is ``openai/<profile>``
at the server, priced as in models.yaml (illustrative prices). The plan is made from the documented
defaults (an empty warehouse); then the run authors, hardens and plays every pair the roles allow through
the real ``Gateway`` (lean HTTP client, call cache, a budget ledger with a cap far above the plan), and is
stored in a DuckDB warehouse as the pipeline stores it. Printed: per model and in total, plan against
actual (calls and tokens with cache hits, dollars at list price, from the warehouse), the requests the
server counted and what the budget ledger recorded as paid. Last line: ``calls_error=..% usd_error=..%``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import urllib.request
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.throughput import start_server  # noqa: E402

PRICES = {"oracle": (15, 60), "expert": (3, 15), "journeyman": (0.8, 4), "apprentice": (0.25, 1.25),
          "novice": (0.1, 0.4)}
CONFIGS = {
    "learner": [("oracle", "author"), ("expert", "author"), ("journeyman", "author"), ("apprentice", "solver")],
    "full": [(p, "author, solver") for p in PRICES],
}


def write_registry(path: Path, base: str, config: str) -> None:
    lines = ["models:"]
    for profile, roles in CONFIGS[config]:
        inp, out = PRICES[profile]
        lines += [f"  - name: {profile}", f"    model: openai/{profile}", f"    api_base: {base}",
                  "    request_contract: true", f"    roles: [{roles}]", f"    input_cost_per_mtok: {inp}",
                  f"    output_cost_per_mtok: {out}"]
    path.write_text("\n".join(lines) + "\n")


async def run_experiment(registry, gw, conn, k: int, seeds: int, rounds: int, after_authoring=None) -> None:
    """Author, harden and play as the pipeline does (core functions of the assets), storing every row."""
    from envduels_dagster.core.authoring.hardening import HardeningInputs, harden_author
    from envduels_dagster.core.authoring.prompts import author_environments
    from envduels_dagster.core.play.episode import PlayConfig, play_pair
    from envduels_dagster.core.requests.plan import planned_pairs
    from envduels_dagster.core.storage.warehouse import environments_frame, episodes_frame, read_table, replace_rows

    now = datetime.now()
    envs = {a: await author_environments(gw, a, k, list(range(seeds))) for a in registry.authors}
    for rnd in range(rounds + 1):
        if rnd > 0:
            hints = sorted({e.hint for specs in envs.values() for e in specs if e.hint})
            for a in registry.authors:
                eps = read_table(conn, "episodes", {"author": a, "round": rnd - 1})
                others = [h for h in hints if h not in {e.hint for e in envs[a]}]
                envs[a] = await harden_author(gw, a, rnd, HardeningInputs(envs[a], eps, others), 1500, None)
        for a, specs in envs.items():
            replace_rows(conn, "environments", environments_frame(specs, "1", now), {"author": a, "round": rnd})
        if rnd == 0 and after_authoring is not None:
            after_authoring()
        for a, s in planned_pairs(registry):
            recs = await play_pair(gw, s, envs[a], PlayConfig(concurrency=8))
            df = episodes_frame(recs, {e.env_id: e.max_turns for e in envs[a]}, "1", now, {e.env_id: rnd for e in envs[a]})
            replace_rows(conn, "episodes", df, {"author": a, "solver": s, "round": rnd})


def low_high() -> str:
    from envduels_dagster.core.requests.plan import FILL_RANGE

    return f"{FILL_RANGE[0]:g}-{FILL_RANGE[1]:g}"


def main() -> int:
    import duckdb

    from envduels_dagster.core.models import Gateway
    from envduels_dagster.core.models.budget import BudgetLedger, caps_for
    from envduels_dagster.core.models.call_cache import CallCache
    from envduels_dagster.core.models.registry import load_registry
    from envduels_dagster.core.requests.plan import PlanSettings, plan_experiment
    from envduels_dagster.core.requests.plan_report import (
        actual_from_warehouse,
        authored_environments,
        compare_rows,
        format_compare,
        measured_rates,
    )

    parser = argparse.ArgumentParser()
    parser.add_argument("--config", choices=sorted(CONFIGS), default="learner")
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=0)
    parser.add_argument("--pilot", type=int, nargs=2, metavar=("ENVS", "SEEDS"),
                        help="first play a pilot of this size (round 0, its own warehouse) and add the plan made from "
                             "the rates it measured")
    parser.add_argument("--run-pilot", action="store_true",
                        help="first run `envduels plan --pilot`'s pilot (the run's own authoring and a slice of its "
                             "play, core/requests/pilot.py) through the same call cache, and add the plan made from it")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    proc, base = start_server(0.0)
    try:
        with tempfile.TemporaryDirectory(prefix="plan-vs-actual-") as tmp:
            work = Path(tmp)
            write_registry(work / "models.yaml", base, args.config)
            registry = load_registry(work / "models.yaml")
            plan = plan_experiment(registry, PlanSettings(args.envs, args.seeds, args.rounds))
            ledger = BudgetLedger(work / "budget.sqlite", caps_for(registry, 1e6))
            gw = Gateway(registry, CallCache(work / "calls.sqlite"), ledger=ledger)
            conn = duckdb.connect(str(work / "warehouse.duckdb"))
            t0 = time.perf_counter()
            replans = []

            def replan() -> None:  # what `envduels plan` says once round 0 is written, before any play
                settings = PlanSettings(args.envs, args.seeds, args.rounds)
                authored = authored_environments(conn, registry)
                replans.append(plan_experiment(registry, settings, measured_rates(conn, registry), authored=authored))
                if pilot_rates:  # and with the solvers' turn_fill measured by the pilot
                    measured = {m: {**pilot_rates.get(m, {}), **r} for m, r in measured_rates(conn, registry).items()}
                    replans.append(plan_experiment(registry, settings, {**pilot_rates, **measured}, authored=authored))

            piloted: list = []
            pilot_rates: dict = {}
            run_piloted: list = []

            async def go():
                try:
                    if args.pilot:  # the recommended workflow for a paid experiment: measure, then plan
                        pilot = duckdb.connect()
                        await run_experiment(registry, gw, pilot, args.pilot[0], args.pilot[1], 0)
                        pilot_rates.update(measured_rates(pilot, registry))
                        piloted.append(plan_experiment(registry, PlanSettings(args.envs, args.seeds, args.rounds),
                                                       pilot_rates))
                        piloted.append(sum(gw.stats.backend_calls.values()))
                    if args.run_pilot:  # `envduels plan --pilot`: its calls are the run's own (the cache keeps them)
                        from envduels_dagster.core.requests.pilot import PilotConfig, run_pilot

                        pilot = duckdb.connect()
                        config = PilotConfig(tuple(registry.authors), tuple(plan.pairs), args.envs,
                                             tuple(range(args.seeds)))
                        res = await run_pilot(gw, config, pilot)
                        run_piloted.append(plan_experiment(
                            registry, PlanSettings(args.envs, args.seeds, args.rounds),
                            measured_rates(pilot, registry, min_envs=1, min_episodes=1),
                            authored=authored_environments(pilot, registry)))
                        run_piloted.append(res)
                    await run_experiment(registry, gw, conn, args.envs, args.seeds, args.rounds, replan)
                finally:
                    await gw.aclose()

            asyncio.run(go())
            seconds = time.perf_counter() - t0
            actual = actual_from_warehouse(conn, registry)
            rows = compare_rows(plan.to_dict(), actual)
            after = compare_rows(replans[0].to_dict(), actual)
            with_pilot = compare_rows(piloted[0].to_dict(), actual) if piloted else None
            pilot_after = compare_rows(replans[1].to_dict(), actual) if piloted else None
            own_pilot = compare_rows(run_piloted[0].to_dict(), actual) if run_piloted else None
            with urllib.request.urlopen(base.removesuffix("/v1") + "/health") as resp:
                served = json.loads(resp.read())["requests"]
            paid = ledger.spent()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    total = rows[-1]
    print(f"config={args.config} pairs={len(plan.pairs)} envs_per_author={args.envs} seeds={args.seeds} "
          f"rounds={args.rounds} run_seconds={seconds:.0f}")
    print("plan before anything runs (documented defaults):")
    print(format_compare(rows))
    print("plan once round 0 is written, before any play (its environments' number and max_turns):")
    print(format_compare(after))
    if with_pilot is not None:
        print(f"plan from a pilot of {args.pilot[0]} environments per author x {args.pilot[1]} seeds "
              f"({piloted[1]} calls, not counted in the actual):")
        print(format_compare(with_pilot))
        print("plan from the pilot's rates once round 0 is written (its environments, the pilot's turn_fill):")
        print(format_compare(pilot_after))
    if plan.span is not None:
        low, high = plan.span
        print(f"range before anything runs (turn_fill {low_high()}): calls {low.calls:,.0f}-{high.calls:,.0f} "
              f"(actual {total['actual_calls']:,.0f}), usd {low.usd:.4f}-{high.usd:.4f} (actual {total['actual_usd']:.4f})")
    if own_pilot is not None:
        res = run_piloted[1]
        print(f"plan from `envduels plan --pilot` ({res.envs_per_pair} environments per pair x 1 seed, {res.episodes} "
              f"episodes, {res.paid_calls} calls paid, all of them the run's own):")
        print(format_compare(own_pilot))
    print(f"server requests={served} ledger paid calls={sum(v['calls'] for v in paid.values())} "
          f"usd={sum(v['usd'] for v in paid.values()):.4f} gateway backend calls={sum(gw.stats.backend_calls.values())}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows, "after_authoring": after,
                                               "with_pilot": with_pilot, "pilot_after_authoring": pilot_after,
                                               "own_pilot": own_pilot,
                                               "range": None if plan.span is None else [vars(x) for x in plan.span],
                                               "served": served}, indent=1))
    print(f"calls_error={total['calls_error']} usd_error={total['usd_error']} after_authoring: "
          f"calls_error={after[-1]['calls_error']} usd_error={after[-1]['usd_error']}"
          + (f" with_pilot: calls_error={with_pilot[-1]['calls_error']} usd_error={with_pilot[-1]['usd_error']}"
             + f" pilot_after_authoring: calls_error={pilot_after[-1]['calls_error']} "
               f"usd_error={pilot_after[-1]['usd_error']}" if with_pilot and pilot_after else "")
          + (f" plan_pilot: calls_error={own_pilot[-1]['calls_error']} usd_error={own_pilot[-1]['usd_error']}"
             if own_pilot else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
