"""What a command does before it changes the experiment's stored settings: the plan of the new settings, the
change in words, the question (``--yes``; refused off a terminal). Shared by ``envduels run`` and ``envduels demo``
(run_command.py, demo.py); where the settings come from: experiment.py."""

from __future__ import annotations

import sys
from pathlib import Path

from envduels_dagster.core.storage.experiment_file import ExperimentSettings


def plan_for(settings: ExperimentSettings):
    """The plan (core/requests/plan.py) of ``settings``: rates measured by earlier runs and a pilot where there are."""
    from envduels_dagster.cli.plan import known_rates
    from envduels_dagster.core.models.registry import load_registry
    from envduels_dagster.core.requests.plan import PlanSettings, plan_experiment
    from envduels_dagster.resources.duel_settings import settings_from_env
    from envduels_dagster.settings.locations import warehouse, warehouse_location

    registry = load_registry(settings.registry)
    sizes = PlanSettings(envs_per_author=settings.envs_per_author, seeds=settings.seeds, rounds=settings.rounds)
    location = warehouse_location()
    if "://" in location or location.startswith("ducklake:") or Path(location).exists():
        with warehouse().connect(read_only=True) as conn:  # closed before any run writes in this process
            measured, authored = known_rates(conn, registry, sizes)
    else:
        measured, authored = known_rates(None, registry, sizes)
    return registry, plan_experiment(registry, sizes, measured, settings_from_env().episode_concurrency, authored)


def settle(new: ExperimentSettings, sources: dict[str, str], command: str, yes: bool, always_ask: bool = False,
           out=None):
    """Before ``command`` runs anything: when ``new`` changes the stored settings (or ``always_ask``: a paid run),
    print what changes and the plan's price, and go on only with ``yes`` or a "y" typed at a terminal (the
    caller then stores ``new``; nothing stored yet: nothing to ask about unless ``always_ask``). Refused:
    UsageError, and nothing was run or written. Returns the plan it printed (None when it printed none)."""
    from envduels_dagster.cli.errors import UsageError
    from envduels_dagster.core.requests.plan import fmt_count, fmt_usd
    from envduels_dagster.core.requests.plan_report import format_plan
    from envduels_dagster.settings import experiment
    from envduels_dagster.settings.variables import budget_cap

    out = out or sys.stdout
    changed = experiment.changes(new)
    if not changed and not always_ask:
        return None  # the first run (nothing stored: run_experiment stores it) or the same settings again
    registry, plan = plan_for(new)
    print(f"{command}: {experiment.describe(new, sources)}", file=out)
    if changed:
        print(f"This changes the experiment's stored settings ({experiment.path_in(experiment.home_dir())}): "
              f"{'; '.join(changed)}. What the new settings plan:", file=out)
    print(format_plan(plan, registry, budget_cap()), file=out)
    kept = experiment.stored()
    if changed and kept is not None and kept.seeds != new.seeds:
        # the authoring prompt names the seeds an environment must win (core/authoring/prompts.py), so every
        # authoring call is new, and so is all play of what it writes: the whole plan above is paid again. (It no
        # longer names the number of environments, prompt version 3: more environments pay only for the new ones.)
        print("Every authoring prompt names the seeds its environment must win, so this change writes and "
              "plays the whole experiment again: it costs the whole plan above.", file=out)
    elif changed:
        try:
            _, old = plan_for(kept or new)
        except Exception:  # e.g. the old registry file is gone: the new plan above still holds
            old = None
        if old is not None:
            more_calls = plan.total().calls - old.total().calls
            new_usd, old_usd = plan.total().usd, old.total().usd
            more = "" if new_usd is None or old_usd is None else f", {fmt_usd(max(0.0, new_usd - old_usd))}"
            print(f"Calls already made come from the call cache and are not paid again: the change costs about "
                  f"{fmt_count(max(0.0, more_calls))} calls{more} more than the stored settings' plan.", file=out)
    if not yes:
        what = "change the experiment and run" if changed else "start the run"
        if not sys.stdin.isatty():
            raise UsageError(f"not started: add --yes to {what} without asking (not on a terminal); nothing was run "
                             "or written")
        if input(f"{what}? [y/N] ").strip().lower() not in ("y", "yes"):
            raise UsageError("not started at your answer; nothing was run or written")
    return plan
