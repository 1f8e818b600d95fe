"""``envduels plan``: what the configured experiment will spend before it runs, and the kept plan against the
warehouse after it ran (core/requests/plan.py, core/requests/plan_report.py). Kept out of ``cli.py`` so that stays a list of commands."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def run_plan(args: argparse.Namespace) -> int:
    """Print (and keep under ENVDUELS_HOME/plans/) what the configured experiment will spend; with --compare, the
    newest kept plan against what the warehouse says was used. Bad budgets or sizes: exit 2, nothing written."""
    import os
    import time

    from envduels_dagster.core.models.budget import BudgetLedger, budget_from_env, caps_for, ledger_path_for
    from envduels_dagster.core.models.registry import load_registry
    from envduels_dagster.core.requests.plan import PlanSettings, plan_experiment
    from envduels_dagster.core.requests.plan_report import (
        actual_from_warehouse,
        authored_environments,
        compare_rows,
        format_compare,
        format_plan,
        measured_rates,
    )
    from envduels_dagster.resources.duel_settings import SettingsError, settings_from_env
    from envduels_dagster.settings import cache_location, envduels_home, warehouse, warehouse_location

    registry = load_registry()
    overall = budget_from_env()
    caps_for(registry, overall)  # a cap that cannot be enforced is refused here, as a run would refuse it
    duel = settings_from_env()
    rounds_text = os.environ.get("ENVDUELS_ROUNDS") or "1"
    if not rounds_text.strip().isdigit():
        raise SettingsError(f"ENVDUELS_ROUNDS={rounds_text!r} cannot be used: a whole number of rounds (0 or more)")
    settings = PlanSettings(envs_per_author=args.envs_per_author or duel.envs_per_author,
                            seeds=args.seeds or len(duel.benchmark_seeds),
                            rounds=int(rounds_text) if args.rounds is None else args.rounds)
    location = warehouse_location()
    conn = None
    if "://" in location or location.startswith("ducklake:") or Path(location).exists():
        conn = warehouse().connect(read_only=True)
    plans = envduels_home() / "plans"
    if args.compare is not None:
        kept = Path(args.compare) if args.compare else max(plans.glob("plan-*.json"), default=None)
        if kept is None or not kept.is_file():
            from envduels_dagster.cli_errors import UsageError

            raise UsageError(f"no kept plan to compare with ({args.compare or plans}); run 'envduels plan' first")
        planned = json.loads(kept.read_text())
        rows = compare_rows(planned, actual_from_warehouse(conn, registry) if conn is not None else [])
        ledger = ledger_path_for(cache_location(), envduels_home())
        spent = BudgetLedger(ledger, caps_for(registry, overall)).spent() if ledger.exists() else {}
        if args.json:
            print(json.dumps({"plan": str(kept), "rows": rows, "ledger_spent": spent}))
        else:
            print(f"plan {kept} against the warehouse {location} (calls and tokens include cache hits; dollars at "
                  "list price; error = (plan - actual) / actual)")
            print(format_compare(rows))
            if spent:
                print("paid (budget ledger): " + ", ".join(f"{m} {v['calls']} calls ${v['usd']:.4f}"
                                                           for m, v in spent.items()))
        return 0
    use_warehouse = conn is not None and not args.defaults_only
    measured = measured_rates(conn, registry) if use_warehouse else {}
    authored = authored_environments(conn, registry) if use_warehouse else {}
    plan = plan_experiment(registry, settings, measured, duel.episode_concurrency, authored)
    record = {**plan.to_dict(), "registry": registry.path, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    plans.mkdir(parents=True, exist_ok=True)
    kept = plans / f"plan-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}.json"
    kept.write_text(json.dumps(record, indent=1))
    if args.json:
        print(json.dumps({**record, "kept": str(kept)}))
    else:
        print(format_plan(plan, registry, overall))
        print(f"kept as {kept}; after the run, 'envduels plan --compare' sets it against what was used")
    return 0
