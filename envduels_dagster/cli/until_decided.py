"""``envduels run --until-decided``: the real run in waves of environments per author until "which author to pay"
is decided for every learner, the budget cap stops play, or the maximum size is reached (issue 42).

Why waves of one run: each wave is ``run_command.run_experiment`` at a larger ``envs_per_author``; the authoring
and play of the earlier waves come from the call cache (the same requests), so a wave pays only its new
environments. After each wave the rule of ``core.value.decision.decide`` (p_best >= 0.95 with every author at the
minimum sample) is applied per learner to the warehouse: the same P(learnable) the answer and the training set
use. The rule's false-decision rate and power are measured on synthetic tournaments
(benchmarks/sequential_decision.py, docs/STATISTICS.md "Deciding which author to pay").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

DECIDED, BUDGET, MAX_SIZE = "decided for every learner", "the budget cap stopped play", "the maximum size was reached"


@dataclass
class Outcome:
    reason: str  # DECIDED, BUDGET or MAX_SIZE
    envs_per_author: int
    waves: int
    decisions: dict = field(default_factory=dict)  # learner -> core.value.decision.Decision
    summaries: list = field(default_factory=list)  # one run_command.RunSummary per wave


def decisions(envs, episodes, learners: list[str]) -> dict:
    """learner -> ``decide`` over its candidate authors (not itself), per dollar when every author is priced."""
    from envduels_dagster.core.value.author_value import ValueConfig, author_value, slot_probabilities
    from envduels_dagster.core.value.decision import decide

    out = {}
    for learner in learners:
        slots = {a: p for a, p in slot_probabilities(envs, episodes, learner).items() if a != learner}
        table, _ = author_value(envs, episodes, learner, ValueConfig(n_boot=50))
        table = table[(table["author"] != learner) & table["author"].isin(list(slots))]
        costs = None
        if len(table) and table["priced"].astype(bool).all():
            per_slot = {r.author: float(r.author_cost_usd) / max(int(r.n_slots), 1) for r in table.itertuples()}
            costs = {a: np.full(p.size, per_slot[a]) for a, p in slots.items()}
        out[learner] = decide(slots, costs)
    return out


def read_warehouse():
    from envduels_dagster.cli.demo import _read
    from envduels_dagster.settings.locations import warehouse_location

    with _read(warehouse_location(), 60.0) as conn:
        envs = conn.execute("SELECT * FROM environments").df()
        episodes = conn.execute("SELECT env_id, author, solver, round, condition, seed, status, model_calls, "
                                "cost_usd FROM episodes").df()
    return envs, episodes


def run_until_decided(settings, plan, wave: int, max_envs: int, run_experiment, log=print) -> Outcome:
    """Run ``settings``, then add ``wave`` environments per author per run until decided (see the module doc).

    ``run_experiment``: what runs one wave (``run_command.run_experiment``; passed in, so this module does not
    import the command that imports it)."""
    from envduels_dagster.core.models.registry import load_registry

    learners = list(load_registry(settings.registry).solvers)
    outcome = Outcome(MAX_SIZE, settings.envs_per_author, 0)
    while True:
        log(f"--until-decided: wave {outcome.waves + 1}, {settings.envs_per_author} environments per author")
        summary = run_experiment(settings, plan if outcome.waves == 0 else None, log=log)
        outcome.summaries.append(summary)
        outcome.waves += 1
        outcome.envs_per_author = settings.envs_per_author
        envs, episodes = read_warehouse()
        outcome.decisions = decisions(envs, episodes, learners)
        for learner, d in sorted(outcome.decisions.items()):
            log(f"--until-decided: {learner}: {d.reason}"
                + (f" (leader {d.leader}, runner-up {d.runner_up})" if d.leader else ""))
        if outcome.decisions and all(d.decided for d in outcome.decisions.values()):
            outcome.reason = DECIDED
            return outcome
        if summary.stopped_at_budget:
            outcome.reason = BUDGET
            return outcome
        if settings.envs_per_author + wave > max_envs:
            outcome.reason = MAX_SIZE
            return outcome
        settings = dataclasses.replace(settings, envs_per_author=settings.envs_per_author + wave)


def format_outcome(outcome: Outcome) -> str:
    lines = [f"--until-decided stopped after {outcome.waves} wave(s) at {outcome.envs_per_author} environments per "
             f"author: {outcome.reason}"]
    for learner, d in sorted(outcome.decisions.items()):
        if d.decided:
            lines.append(f"  {learner}: pay {d.leader} (p_best {d.p_best[d.leader]:.3f}; runner-up {d.runner_up} "
                         f"p_best {d.p_best[d.runner_up]:.3f})")
        else:
            lines.append(f"  {learner}: not decided: {d.reason}")
    return "\n".join(lines)


def max_size_note(settings, max_envs: int) -> str:
    """What the largest wave would cost, stated before the run asks (the first wave's plan follows)."""
    from envduels_dagster.cli.experiment_change import plan_for
    from envduels_dagster.core.requests.plan import fmt_count, fmt_usd

    _, plan = plan_for(dataclasses.replace(settings, envs_per_author=max_envs))
    t = plan.total()
    return (f"--until-decided: adds waves of environments per author until every learner's answer is decided "
            f"(p_best >= 0.95), up to {max_envs} per author: at most about {fmt_count(t.calls)} calls, "
            f"{fmt_usd(t.usd)} at list price for the whole experiment at that size (earlier waves come from the "
            "call cache; --budget-usd stops it sooner). The first wave:")
