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
    import sys
    import time

    from envduels_dagster.cli.envs import json_line
    from envduels_dagster.core.models.budget import BudgetLedger, caps_for, ledger_path_for
    from envduels_dagster.core.models.registry import load_registry
    from envduels_dagster.core.requests.plan import PlanSettings, plan_experiment
    from envduels_dagster.core.requests.plan_decision import format_sizes
    from envduels_dagster.core.requests.plan_report import (
        actual_from_warehouse,
        compare_rows,
        format_compare,
        format_plan,
    )
    from envduels_dagster.core.requests.roster import Roster
    from envduels_dagster.resources.duel_settings import settings_from_env
    from envduels_dagster.settings.locations import (
        cache_location,
        envduels_home,
        registry_file,
        warehouse,
        warehouse_location,
    )
    from envduels_dagster.settings.variables import budget_cap

    if args.yes and not args.pilot:
        from envduels_dagster.cli.errors import UsageError

        raise UsageError("--yes only goes with --pilot (it runs the pilot without asking)")
    if args.pilot and args.compare is not None:
        from envduels_dagster.cli.errors import UsageError

        raise UsageError("--pilot and --compare do not go together: the pilot comes before the run, the "
                         "comparison after it")
    registry = load_registry(registry_file())
    overall = budget_cap()
    caps_for(registry, overall)  # a cap that cannot be enforced is refused here, as a run would refuse it
    Roster.from_registry(registry)  # so are roles that make no experiment (solver-only, author-only: issue 44)
    # sizes: the flags, else the variables, else the experiment's stored settings, else the defaults (experiment.py)
    from envduels_dagster.settings import experiment

    new, _ = experiment.requested({"envs_per_author": args.envs_per_author, "seeds": args.seeds,
                                   "rounds": args.rounds})
    duel = settings_from_env(envs_per_author=new.envs_per_author, benchmark_seeds=list(range(new.seeds)))
    settings = PlanSettings(envs_per_author=new.envs_per_author, seeds=new.seeds, rounds=new.rounds,
                            author_wave=duel.author_wave_size)
    changed = experiment.changes(new) if args.compare is None else None
    if changed:  # a plan of other sizes than the experiment's: say so (a run with them would change it)
        print(f"note: these sizes differ from the experiment's stored settings ({'; '.join(changed)}); "
              "'envduels run' with them changes the experiment (it prints the change and asks first)",
              file=sys.stderr if args.json else sys.stdout)
    location = warehouse_location()
    conn = None
    if "://" in location or location.startswith("ducklake:") or Path(location).exists():
        conn = warehouse().connect(read_only=True)
    plans = envduels_home() / "plans"
    if args.compare is not None:
        kept = Path(args.compare) if args.compare else max(plans.glob("plan-*.json"), default=None)
        if kept is None or not kept.is_file():
            from envduels_dagster.cli.errors import UsageError

            raise UsageError(f"no kept plan to compare with ({args.compare or plans}); run 'envduels plan' first")
        planned = json.loads(kept.read_text())
        rows = compare_rows(planned, actual_from_warehouse(conn, registry) if conn is not None else [])
        ledger = ledger_path_for(cache_location(), envduels_home())
        spent = BudgetLedger(ledger, caps_for(registry, overall)).spent() if ledger.exists() else {}
        differ = size_differences(planned.get("settings", {}), used_sizes(conn) if conn is not None else {})
        if args.json:
            print(json_line({"plan": str(kept), "rows": rows, "ledger_spent": spent, "size_warnings": differ}))
        else:
            for line in differ:
                print(f"warning: {line}", file=sys.stderr)
            print(f"plan {kept} against the warehouse {location} (calls and tokens include cache hits; dollars at "
                  "list price; error = (plan - actual) / actual)")
            print(format_compare(rows))
            if spent:
                print("paid (budget ledger): " + ", ".join(f"{m} {v['calls']} calls ${v['usd']:.4f}"
                                                           for m, v in spent.items()))
        return 0
    from envduels_dagster.core.requests.plan_decision import minimum_warning

    warning = minimum_warning(settings.envs_per_author)  # before any call: this size cannot answer the question
    if warning:
        print(warning, file=sys.stderr)
    measured, authored = ({}, {}) if args.defaults_only else known_rates(conn, registry, settings)
    if args.pilot:
        done = run_pilot_command(args, registry, settings, duel, measured, authored, overall)
        if done is None:
            return 0
        measured, authored = known_rates(conn, registry, settings)
        print(done, file=sys.stderr if args.json else sys.stdout)
    plan = plan_experiment(registry, settings, measured, duel.episode_concurrency, authored)
    sizes = [] if args.defaults_only else answer_sizes(conn, registry, settings, measured, duel.episode_concurrency)
    record = {**plan.to_dict(), "registry": registry.path, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "answer": {"warning": warning, "sizes": [vars(s) for s in sizes]}}
    plans.mkdir(parents=True, exist_ok=True)
    kept = plans / f"plan-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}.json"
    kept.write_text(json.dumps(record, indent=1))
    if args.json:
        print(json_line({**record, "kept": str(kept)}))
    else:
        print(format_plan(plan, registry, overall))
        print(format_sizes(sizes, settings.envs_per_author))
        print(f"kept as {kept}; after the run, 'envduels plan --compare' sets it against what was used")
    return 0


def used_sizes(conn) -> dict[str, int]:
    """The sizes the warehouse's experiment was run at: environments an author wrote in round 0 (the most any
    author wrote), benchmark seeds per environment, hardening rounds; empty without environments."""
    try:
        row = conn.execute("SELECT (SELECT max(n) FROM (SELECT count(*) AS n FROM environments WHERE round = 0 "
                           "GROUP BY author)), max(len(benchmark_seeds)), max(round) FROM environments").fetchone()
    except Exception:  # no environments table yet: nothing ran, nothing to compare sizes with
        return {}
    if row is None or row[0] is None:
        return {}
    return {"envs_per_author": int(row[0]), "seeds": int(row[1] or 0), "rounds": int(row[2] or 0)}


def size_differences(planned: dict, used: dict[str, int]) -> list[str]:
    """One line per size the plan was made for that differs from what the warehouse's run used."""
    names = {"envs_per_author": "environments per author", "seeds": "seeds", "rounds": "hardening rounds"}
    return [f"the plan was made for {planned[k]} {names[k]}, the warehouse's run used {used[k]}: the comparison "
            f"sets different experiments against each other (plan again with --{k.replace('_', '-')} {used[k]})"
            for k in names if k in planned and k in used and int(planned[k]) != used[k]]


def answer_sizes(conn, registry, settings, measured: dict, concurrency: int) -> list:
    """Per learner, the size that names its best author (``core.requests.plan_decision``), from the pilot's
    warehouse when there is one, else the run's; each size priced as the whole experiment at that size."""
    import duckdb

    from envduels_dagster.core.requests.plan import PlanSettings, plan_experiment
    from envduels_dagster.core.requests.plan_decision import decision_sizes
    from envduels_dagster.core.requests.plan_report import _has_tables

    def price(n: int) -> tuple[float, float | None]:
        total = plan_experiment(registry, PlanSettings(n, settings.seeds, settings.rounds), measured,
                                concurrency).total()
        return total.calls, total.usd

    def read(c) -> list:
        if c is None or not _has_tables(c):
            return []
        envs = c.execute("SELECT * FROM environments").df()
        episodes = c.execute("SELECT env_id, author, solver, round, condition, seed, status, model_calls, cost_usd "
                             "FROM episodes").df()
        return decision_sizes(envs, episodes, list(registry.solvers), price)

    if pilot_path().exists():
        with duckdb.connect(str(pilot_path()), read_only=True) as pilot:
            found = read(pilot)
        if found:
            return found
    return read(conn)


def pilot_path():
    """The pilot's own warehouse (``envduels plan --pilot``): its partial pairs never mix with the run's."""
    from envduels_dagster.settings.locations import envduels_home

    return envduels_home() / "plans" / "pilot.duckdb"


def known_rates(conn, registry, settings) -> tuple[dict, dict]:
    """Measured rates and written environments: from the pilot's warehouse when there is one (every episode it
    played counts, it was made to measure), then from the run's warehouse, which wins where it has its own."""
    from dataclasses import replace

    import duckdb

    from envduels_dagster.core.requests.plan_report import authored_environments, measured_rates

    measured: dict = {}
    authored: dict = {}
    if pilot_path().exists():
        with duckdb.connect(str(pilot_path()), read_only=True) as pilot:
            measured = {m: {n: replace(r, source=r.source.replace("measured", "pilot-measured", 1))
                            for n, r in rates.items()}
                        for m, rates in measured_rates(pilot, registry, min_envs=1, min_episodes=1).items()}
            # the pilot's environments stand for the run's only when written at the run's size
            authored = {key: a for key, a in authored_environments(pilot, registry).items()
                        if a.written == settings.envs_per_author}
    if conn is not None:
        for model, rates in measured_rates(conn, registry).items():
            measured[model] = {**measured.get(model, {}), **rates}
        authored.update(authored_environments(conn, registry))
    return measured, authored


class PilotFailed(RuntimeError):
    """A pilot that failed, said without its scratch file's name."""


def run_pilot_command(args, registry, settings, duel, measured: dict, authored: dict, overall) -> str | None:
    """``envduels plan --pilot``: print what the pilot will spend, ask (or take --yes), run it into its own
    warehouse and say what it paid; None when it was not run. One pilot at a time per home (``process_lock``):
    a second is refused before it pays for anything, naming the first."""
    import sys

    from envduels_dagster.cli.process_lock import exclusive
    from envduels_dagster.core.requests.pilot import PILOT_SEEDS, envs_per_pair
    from envduels_dagster.core.requests.plan import PlanSettings, fmt_count, fmt_usd, plan_experiment

    out = sys.stderr if args.json else sys.stdout  # --json keeps stdout for the plan's JSON
    n = envs_per_pair(len(registry.authors))
    pilot_settings = PlanSettings(settings.envs_per_author, PILOT_SEEDS, 0, play_envs=n, author_wave=settings.author_wave)
    plan = plan_experiment(registry, pilot_settings, measured, duel.episode_concurrency, authored)
    t = plan.total()
    span = "" if plan.span is None else (f" (range {fmt_count(plan.span[0].calls)}-{fmt_count(plan.span[1].calls)} "
                                         f"calls, {fmt_usd(plan.span[0].usd)}-{fmt_usd(plan.span[1].usd)})")
    print(f"pilot: every author writes its round 0 as the run will ({settings.envs_per_author} environments), then "
          f"each of the {len(plan.pairs)} pairs plays {min(n, settings.envs_per_author)} of them (spread over their lengths) x seed "
          f"{duel.benchmark_seeds[0]} x cold and hinted; about {fmt_count(t.calls)} calls, {fmt_usd(t.usd)}{span} at "
          "list price. These are the run's own calls: the run gets them from the call cache and does not pay "
          "them twice.", file=out)
    if not args.yes:
        if not sys.stdin.isatty():
            print("pilot not run: add --yes to run it", file=out)
            return None
        if input("run the pilot? [y/N] ").strip().lower() not in ("y", "yes"):
            print("pilot not run", file=out)
            return None
    path = pilot_path()
    with exclusive(path.with_name("pilot.lock"), "another pilot (envduels plan --pilot)"):  # one per home
        return _pilot(registry, settings, duel, plan, path, out)


def _pilot(registry, settings, duel, plan, path, out) -> str:
    """The pilot itself, under its lock: into a scratch warehouse that replaces the kept one when it completes."""
    import asyncio

    import duckdb

    from envduels_dagster.core.models import Gateway, RetryPolicy, open_limiter
    from envduels_dagster.core.models.budget import open_ledger
    from envduels_dagster.core.models.call_cache import open_call_cache
    from envduels_dagster.core.requests.pilot import PilotConfig, run_pilot
    from envduels_dagster.settings.locations import cache_location, envduels_home
    from envduels_dagster.settings.variables import budget_cap, int_value

    cache = cache_location()
    gateway = Gateway(registry, open_call_cache(cache), RetryPolicy(),
                      ledger=open_ledger(registry, budget_cap(), cache, envduels_home()), limiter=open_limiter(cache),
                      litellm_processes=int_value("ENVDUELS_LITELLM_PROCESSES"))
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = path.with_suffix(".new.duckdb")
    fresh.unlink(missing_ok=True)

    async def go():
        try:
            with duckdb.connect(str(fresh)) as conn:
                config = PilotConfig(tuple(registry.authors), tuple(plan.pairs), settings.envs_per_author,
                                     tuple(duel.benchmark_seeds), authoring_plan=duel.authoring_plan(),
                                     concurrency=duel.episode_concurrency)
                return await run_pilot(gateway, config, conn,
                                       on_progress=lambda msg: print(f"  pilot: {msg}", file=out, flush=True))
        finally:
            await gateway.aclose()

    try:
        result = asyncio.run(go())
    except BaseException as exc:
        fresh.unlink(missing_ok=True)  # a pilot cut short measures nothing: the last complete one stays
        if isinstance(exc, Exception) and (str(fresh) in str(exc) or fresh.name in str(exc)):
            # the scratch file is the pilot's business: say what failed, not its name (issue 44)
            text = str(exc)
            for name in (str(fresh), f"plans/{fresh.name}", fresh.name):
                text = text.replace(name, "its scratch warehouse")
            raise PilotFailed(f"the pilot failed: {text}; nothing it measured was kept"
                              + (f" (the last complete pilot, {path}, stays)" if path.exists() else "")) from exc
        raise
    fresh.replace(path)
    return (f"pilot done: {result.episodes} episodes, {result.paid_calls} calls paid, {result.cached_calls} from the "
            f"call cache; the plan below uses what it measured (kept in {path})")
