"""``envduels run``: the real, paid experiment, and the settings change every later run goes through.

Why its own command: ``envduels demo`` is the offline demo on the simulated models; a practitioner's run calls
paid models, so it is priced before it starts (the plan: calls, tokens, dollars per model), asks before it
spends (``--yes``; without a terminal it refuses), goes through the same pre-flight checks (registry, roles,
budget caps, sizes) and the same budget ledger as every other entry point, and prints after each stage the
calls and dollars used so far against the plan. The run itself is :func:`run_experiment`, a function of the
settings that returns a :class:`RunSummary`, so a caller can run it again with a larger experiment (a later
wave of environments per author, ``with_envs``) without going through argparse.

Where the settings come from and what a change does: ``envduels_dagster/settings/experiment.py``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, dataclass, field

from envduels_dagster.cli.experiment_change import settle
from envduels_dagster.core.storage.experiment_file import ExperimentSettings


@dataclass
class StageProgress:
    label: str  # the run that finished ("round 0 authoring [expert]", "round 0 pairs a|b..c|d", "marts and rankings")
    secs: float
    calls: float  # used so far by the experiment (call-cache hits included), as the warehouse records them
    usd: float  # those calls at list price, priced models only
    unpriced: bool  # some calls were of a model without a price (not counted as $0)
    paid_calls: int  # paid by this run so far, as the budget ledger counted them
    paid_usd: float
    paid_counted: bool = True  # False: no cap is set, so the ledger counts nothing (paid calls are not known)


@dataclass
class RunSummary:
    settings: ExperimentSettings
    request: str  # the runs' envduels/request tag
    stages: list[StageProgress] = field(default_factory=list)
    planned_calls: float | None = None
    planned_usd: float | None = None
    stopped_at_budget: int = 0  # episodes the budget cap cut (incomplete, left out of every statistic)
    counts: dict = field(default_factory=dict)

    @property
    def calls(self) -> float:
        return self.stages[-1].calls if self.stages else 0.0

    @property
    def usd(self) -> float:
        return self.stages[-1].usd if self.stages else 0.0

    @property
    def paid_usd(self) -> float:
        return self.stages[-1].paid_usd if self.stages else 0.0

    def to_dict(self) -> dict:
        return {**asdict(self), "calls": self.calls, "usd": self.usd, "paid_usd": self.paid_usd}


def run_experiment(settings: ExperimentSettings, plan=None, log=print, written_by: str = "envduels run",
                   learners: bool = True) -> RunSummary:
    """Store ``settings`` as the experiment's and run the whole pipeline in this process through Dagster (the
    project's jobs, as the request sensor would launch them). ``plan``: the plan to report progress against.
    Calls already made (an earlier run, a pilot, a smaller wave) come from the call cache."""
    import dagster as dg

    from envduels_dagster.cli.demo import materialize_all
    from envduels_dagster.cli.interrupts import quiet_orphan_watchers
    from envduels_dagster.definitions import build_definitions, build_resources
    from envduels_dagster.instance.home import prepare_instance_home
    from envduels_dagster.settings import experiment

    experiment.store(settings, written_by)
    build_definitions.cache_clear()  # the round assets follow the stored rounds, also on a second call in a process
    home = prepare_instance_home()
    quiet_orphan_watchers()  # Ctrl-C: no traceback from Dagster's per-step watcher (interrupts.py, issue 44)
    usage = _Usage(settings)
    summary = RunSummary(settings, request="", planned_calls=plan.total().calls if plan else None,
                         planned_usd=plan.total().usd if plan else None)
    log(f"experiment: {experiment.describe(settings)}; DAGSTER_HOME={home}")

    def progress(label: str, secs: float) -> None:
        stage = usage.now(label, secs)
        summary.stages.append(stage)
        log(format_progress(stage, summary))

    resources = build_resources()  # the sizes just stored (settings_from_env reads them)
    with dg.DagsterInstance.get() as instance:
        counts = materialize_all(instance, resources, log=log, on_run=progress, learners=learners)
    summary.request = str(counts.pop("request", ""))
    summary.counts = counts
    summary.stopped_at_budget = usage.stopped_at_budget()
    return summary


def format_progress(stage: StageProgress, summary: RunSummary) -> str:
    from envduels_dagster.core.requests.plan import fmt_count, fmt_usd

    planned = ("" if summary.planned_calls is None else
               f" of planned {fmt_count(summary.planned_calls)} calls, {fmt_usd(summary.planned_usd)}")
    unpriced = " + unpriced" if stage.unpriced else ""
    paid = (f"paid by this run {stage.paid_calls} calls ${stage.paid_usd:.4f} (budget ledger)" if stage.paid_counted
            else "paid: not counted (no budget cap; --budget-usd caps and counts it)")
    return (f"[spent] after {stage.label} ({stage.secs:.1f}s): {fmt_count(stage.calls)} calls, {fmt_usd(stage.usd)}"
            f"{unpriced} at list price so far{planned}; {paid}")


class _Usage:
    """What the experiment has used (warehouse, cache hits included) and this run has paid (budget ledger)."""

    def __init__(self, settings: ExperimentSettings):
        from envduels_dagster.core.models.budget import caps_for
        from envduels_dagster.core.models.registry import load_registry
        from envduels_dagster.settings.variables import budget_cap

        self.settings = settings
        self.counted = caps_for(load_registry(settings.registry), budget_cap()).active
        self.start = self._paid()

    def _paid(self) -> tuple[int, float]:
        from envduels_dagster.core.models.budget import BudgetLedger, Caps, ledger_path_for
        from envduels_dagster.settings.locations import cache_location, envduels_home

        path = ledger_path_for(cache_location(), envduels_home())
        if not path.exists():
            return 0, 0.0
        ledger = BudgetLedger(path, Caps())
        try:
            spent = ledger.spent()
        finally:
            ledger.close()
        return int(sum(v["calls"] for v in spent.values())), float(sum(v["usd"] or 0.0 for v in spent.values()))

    def now(self, label: str, secs: float) -> StageProgress:
        from envduels_dagster.cli.demo import _read
        from envduels_dagster.core.models.registry import load_registry
        from envduels_dagster.core.requests.plan_report import actual_from_warehouse
        from envduels_dagster.settings.locations import warehouse_location

        with _read(warehouse_location(), 60.0) as conn:
            lines = actual_from_warehouse(conn, load_registry(self.settings.registry))
        usd = sum(ln.usd or 0.0 for ln in lines)
        unpriced = any(ln.usd is None and ln.calls for ln in lines)
        calls, paid = self._paid()
        return StageProgress(label, secs, sum(ln.calls for ln in lines), usd, unpriced, calls - self.start[0],
                             paid - self.start[1], self.counted)

    def stopped_at_budget(self) -> int:
        from envduels_dagster.cli.demo import _read
        from envduels_dagster.settings.locations import warehouse_location

        with _read(warehouse_location(), 60.0) as conn:
            row = conn.execute("SELECT count(*) FROM episodes WHERE stop_reason = 'stopped_at_budget'").fetchone()
        return int(row[0]) if row else 0


def cmd_run(args: argparse.Namespace) -> int:
    """``envduels run``: pre-flight checks, the plan and the question, then :func:`run_experiment`."""
    import os

    from envduels_dagster.cli.demo import print_summary
    from envduels_dagster.core.models.budget import caps_for
    from envduels_dagster.core.models.registry import load_registry
    from envduels_dagster.core.requests.roster import Roster
    from envduels_dagster.resources.duel_settings import settings_from_env
    from envduels_dagster.settings import experiment
    from envduels_dagster.settings.variables import budget_cap

    if args.budget_usd is not None:
        os.environ["ENVDUELS_BUDGET_USD"] = repr(args.budget_usd)  # this process and the runs it executes
    new, sources = experiment.requested({"envs_per_author": args.envs_per_author, "seeds": args.seeds,
                                         "rounds": args.rounds}, args.registry)
    # pre-flight, before anything is asked, written or spent: sizes, registry and roles, budget caps
    settings_from_env(envs_per_author=new.envs_per_author, benchmark_seeds=list(range(new.seeds)))
    registry = load_registry(new.registry)
    Roster.from_registry(registry)
    caps_for(registry, budget_cap())
    if getattr(args, "until_decided", False):  # issue 42: the most it can cost, before it asks
        from envduels_dagster.cli.until_decided import max_size_note

        if args.max_envs < new.envs_per_author:
            from envduels_dagster.cli.errors import UsageError

            raise UsageError(f"--max-envs {args.max_envs} is below the first wave's {new.envs_per_author} "
                             "environments per author")
        print(max_size_note(new, args.max_envs))
    plan = settle(new, sources, "envduels run", args.yes, always_ask=True)
    if args.registry:
        os.environ["ENVDUELS_REGISTRY"] = new.registry  # the runs of this process read the same file
    _keep(plan, new)
    t0 = time.perf_counter()
    if getattr(args, "until_decided", False):
        from envduels_dagster.cli.until_decided import format_outcome, run_until_decided

        outcome = _quiet(args, lambda: run_until_decided(new, plan, args.wave, args.max_envs, run_experiment,
                                                         log=lambda m: print(m, flush=True)))
        summary = outcome.summaries[-1]
        print(format_outcome(outcome))
    else:
        summary = _quiet(args, lambda: run_experiment(new, plan, log=lambda m: print(m, flush=True)))
    print(f"\nRun done in {time.perf_counter() - t0:.0f}s: {summary.counts.get('pairs', 0)} pairs"
          + (": " + format_progress(summary.stages[-1], summary).split(": ", 1)[1] if summary.stages else ""))
    if summary.stopped_at_budget:
        print(f"The budget cap stopped {summary.stopped_at_budget} episode(s) (incomplete, left out of every "
              "statistic): raise ENVDUELS_BUDGET_USD (or --budget-usd) and run again; calls already made are not "
              "paid twice.")
        for line in summary.counts.get("budget_stops", []):  # per pair: what each cap has left (issue 44)
            print(f"  {line}")
    print()
    print_summary({**summary.counts, "request": summary.request})
    return 0


def _quiet(args: argparse.Namespace, go):
    """Dagster's own warnings and failure logs go to a file named in the error, as for ``envduels demo``."""
    import contextlib
    import io

    from envduels_dagster.settings.locations import envduels_home

    if getattr(args, "debug", False):
        return go()
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return go()
    except Exception as exc:
        if not captured.getvalue():
            raise
        log = envduels_home() / "logs" / "run-failure.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(captured.getvalue())
        if isinstance(exc, RuntimeError):
            raise RuntimeError(f"{exc}; Dagster's log of the failure: {log}") from exc
        raise


def _keep(plan, settings: ExperimentSettings) -> None:
    """Keep the run's plan under plans/ like ``envduels plan`` does, so ``envduels plan --compare`` reads it."""
    import json
    import os

    from envduels_dagster.settings.locations import envduels_home

    plans = envduels_home() / "plans"
    plans.mkdir(parents=True, exist_ok=True)
    record = {**plan.to_dict(), "registry": settings.registry, "by": "envduels run",
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (plans / f"plan-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}.json").write_text(
        json.dumps(record, indent=1))


def add_parser(add) -> None:
    """The ``run`` subcommand (``add`` makes a subparser the way ``cli/__init__.py`` does)."""
    from envduels_dagster.cli.options import add_size_options, float_in, int_in

    p = add("run", help="run a real experiment on the registry's models (paid: priced and confirmed first)",
            description="Run the experiment on the registry's models, through Dagster, in this process: every "
                        "author writes its environments, every author x learner pair plays them cold and hinted, "
                        "then the marts, rankings, author value and training sets. Prints the plan (calls, tokens, "
                        "dollars per model) and asks before it spends (--yes: do not ask; not on a terminal it "
                        "refuses without --yes). The sizes and the registry are stored with the experiment "
                        "($ENVDUELS_HOME/experiment.json): the UI, its daemon, plan and later runs use them; a later "
                        "run with other sizes says what changes and what it costs before it runs. Calls already "
                        "made come from the call cache and are not paid twice. For the offline demo on the "
                        "simulated models use 'envduels demo'. A paid run, for example: "
                        "ENVDUELS_REGISTRY=my-models.yaml envduels run --envs-per-author 10 --seeds 4 --rounds 0 "
                        "--budget-usd 20",
            examples=("envduels run --envs-per-author 1 --seeds 2 --yes",))
    p.add_argument("--registry", metavar="FILE", help="the model registry (default: ENVDUELS_REGISTRY, else the "
                   "experiment's stored registry, else ./models.yaml)")
    add_size_options(p)
    p.add_argument("--budget-usd", type=float_in(0.0, None, "--budget-usd"), default=None,
                   help="stop spending at this many US dollars over every priced model, across runs (sets "
                        "ENVDUELS_BUDGET_USD for this run)")
    p.add_argument("--yes", action="store_true", help="start without asking (the plan is still printed)")
    p.add_argument("--until-decided", action="store_true",
                   help="add --wave environments per author after each run until every learner's answer is decided "
                        "(p_best >= 0.95), the budget cap stops play, or --max-envs is reached; says why it stopped")
    p.add_argument("--wave", type=int_in(1, 1000, "--wave"), default=4,
                   help="with --until-decided: environments per author each wave adds (default 4)")
    p.add_argument("--max-envs", type=int_in(1, 1000, "--max-envs"), default=64,
                   help="with --until-decided: the most environments per author it goes to (default 64)")
    p.set_defaults(func=cmd_run)
