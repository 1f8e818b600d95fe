"""The plan sized for an answer (issue 42): can the configured size answer "which author to pay" at all, and
what size names the best author for each learner, with its calls and dollars.

Why beside the plan and not in it: ``plan.py`` prices a size; this says whether that size is worth paying for.
Two statements:

* ``minimum_warning``: below ``min_envs`` (``AuthorValueSettings.min_envs``, 4) environment slots per author no
  author is ranked and every learner's answer is "insufficient data"; said before any call.
* ``decision_sizes``: after a pilot (or earlier runs), per learner, the author value of what was measured
  (``core.value.author_value``: learnable per environment slot, the training set's P(learnable)), and from the
  spread of those rates the environments per author a run needs to name the best author with p_best >= 0.9 in
  80% of runs (``core.value.decision.size_for_decision``: twice the simulated ``envs_needed``, as calibrated in
  docs/STATISTICS.md), priced by the plan.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from envduels_dagster.core.value.author_value import MIN_ENVS


def minimum_warning(envs_per_author: int, min_envs: int = MIN_ENVS) -> str | None:
    """The warning when ``envs_per_author`` cannot give any answer (None when it can)."""
    if envs_per_author >= min_envs:
        return None
    return (f"warning: {envs_per_author} environment(s) per author cannot name an author to pay: an author needs "
            f"{min_envs} environments played by the learner to be ranked (AuthorValueSettings.min_envs), so every "
            f"learner's answer will be 'insufficient data'; plan at least --envs-per-author {min_envs}")


@dataclass(frozen=True)
class DecisionSize:
    learner: str
    rates: dict[str, float]  # author -> learnable per environment slot, as measured
    n_measured: dict[str, int]  # author -> environment slots behind the rate
    envs: int | None  # environments per author for a decision (None: the measured rates do not separate)
    calls: float | None = None
    usd: float | None = None
    note: str = ""


def measured_values(envs: pd.DataFrame, episodes: pd.DataFrame,
                    learners: list[str]) -> tuple[dict[str, pd.DataFrame], dict[str, dict]]:
    """Per learner, its ``author_value`` rows (every author other than itself with a measured slot) and each
    author's slots' P(learnable) (``author_value.slot_probabilities``)."""
    from envduels_dagster.core.value.author_value import ValueConfig, author_value, slot_probabilities

    out, slots = {}, {}
    for learner in learners:
        if episodes.empty or not (episodes["solver"] == learner).any():
            continue
        table, _ = author_value(envs, episodes, learner, ValueConfig(min_envs=1, n_boot=200))
        out[learner] = table[~table["is_self"] & (table["n_envs"] > 0)]
        slots[learner] = slot_probabilities(envs, episodes, learner)
    return out, slots


def decision_sizes(envs: pd.DataFrame, episodes: pd.DataFrame, learners: list[str], price) -> list[DecisionSize]:
    """Per learner with measurements: the size that names its best author, priced by ``price(n) -> (calls, usd)``
    (the whole experiment at n environments per author, before the call cache)."""
    from envduels_dagster.core.value.decision import size_for_decision

    out = []
    values, slots = measured_values(envs, episodes, learners)
    for learner, t in values.items():
        if len(t) < 2:
            out.append(DecisionSize(learner, {}, {}, None, note="fewer than 2 authors measured for this learner"))
            continue
        rates = {r.author: float(r.per_env) for r in t.itertuples(index=False)}
        priced = bool(t["priced"].astype(bool).all())
        costs = ({r.author: float(r.author_cost_usd) / max(int(r.n_slots), 1) for r in t.itertuples(index=False)}
                 if priced else None)
        n = size_for_decision({a: p for a, p in slots[learner].items() if a in rates}, costs=costs)
        measured = {r.author: int(r.n_envs) for r in t.itertuples(index=False)}
        if n is None:
            out.append(DecisionSize(learner, rates, measured, None,
                                    note="the measured rates of the two leading authors do not differ enough for "
                                         "any size up to 512 environments per author to separate them"))
            continue
        calls, usd = price(n)
        out.append(DecisionSize(learner, rates, measured, n, calls, usd))
    return out


def format_sizes(sizes: list[DecisionSize], configured: int) -> str:
    """What ``envduels plan`` prints under the plan."""
    from envduels_dagster.core.requests.plan import fmt_count, fmt_usd

    if not sizes:
        return ("size for an answer: nothing measured yet for any learner ('envduels plan --pilot' measures the "
                "learnable rates that size the experiment)")
    lines = ["size for an answer (environments per author to name the best author with p_best >= 0.9 in 80% of "
             "runs, from the learnable rates measured so far; calibration: docs/STATISTICS.md):"]
    for s in sizes:
        measured = ", ".join(f"{a} {r:.2f} (n={s.n_measured[a]})" for a, r in sorted(s.rates.items(),
                                                                                   key=lambda kv: -kv[1]))
        if s.envs is None:
            lines.append(f"  {s.learner}: no size: {s.note}" + (f" (learnable per environment: {measured})"
                                                                 if measured else ""))
            continue
        verdict = "the configured size is enough" if configured >= s.envs else \
            f"the configured {configured} is not enough"
        lines.append(f"  {s.learner}: {s.envs} environments per author, about {fmt_count(s.calls or 0)} calls, "
                     f"{fmt_usd(s.usd)} for the whole experiment at that size ({verdict}; learnable per "
                     f"environment: {measured})")
    lines.append("  measured rates from a pilot rest on few environments and seeds: the size is a guide, and "
                 "'envduels run --until-decided' stops when the answer is known")
    return "\n".join(lines)
