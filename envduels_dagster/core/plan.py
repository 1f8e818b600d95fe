"""The price of an experiment before anything runs: calls, tokens, dollars and hours, per model and in total.

Why a model of the run and not a guess per call: what an experiment costs is a product of counts the
settings fix (authors x environments, pairs x seeds x 2 conditions, rounds) and of rates only a run
can measure (how many environments an author gets valid, how many turns a solver takes, how long
a play prompt grows). Each rate says where it came from: measured in the warehouse from earlier runs
of that model when there are any (``measured_rates``), otherwise a documented default
(``DEFAULTS``; docs/BENCHMARKS.md "Plan against actual" measures them). A model without a price is
listed as unpriced, never as $0.

The pairs come from the registry's roles (``planned_pairs``): each author-role model x each
solver-role model, self pairs included when a model has both roles, as the pipeline plays them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from envduels_dagster.core.registry import ModelEntry, Registry

# Documented defaults, used for a model with no measured runs (docs/BENCHMARKS.md, "Plan against actual").
# Play prompt tokens are a mean per call: a solver's prompt is the whole conversation so far, so it grows
# with every turn (first prompt + PLAY_GROWTH per earlier turn); a constant per call under-counted long
# episodes by half. Authoring prompts are counted from the prompt text itself.
DEFAULTS = {
    "validity": 0.8,  # share of written environments that validate (and get played)
    "author_completion_tokens": 600.0,  # one environment class with its hint and metadata
    "harden_prompt_extra_tokens": 500.0,  # a hardening digest beyond the parent's source: pass rates, excerpts
    "turns": 6.0,  # model calls per episode
    "play_first_prompt_tokens": 150.0,  # system prompt + first observation (+ hint)
    "play_growth_tokens": 40.0,  # one earlier turn's reply + observation, carried in every later prompt
    "play_completion_tokens": 12.0,  # a short reasoning line and a \\boxed{} action
    "latency_s": 2.0,  # per call of a remote model; simulated models in-process: 0
}


def planned_pairs(registry: Registry) -> list[tuple[str, str]]:
    """(author, solver) for every author-role model x every solver-role model, in registry order."""
    return [(a.name, s.name) for a in registry.models if a.authors for s in registry.models if s.solves]


@dataclass(frozen=True)
class PlanSettings:
    envs_per_author: int = 10
    seeds: int = 8
    rounds: int = 1  # hardening rounds after round 0
    conditions: int = 2  # cold and hinted


@dataclass(frozen=True)
class Rate:
    value: float
    source: str  # "measured (n=...)" or "default"


@dataclass
class Line:
    """What one model does in one stage: calls, tokens and dollars (``usd`` None when unpriced)."""

    model: str
    stage: str  # "authoring r0", "hardening r1", "play r0", ...
    calls: float
    prompt_tokens: float
    completion_tokens: float
    usd: float | None
    hours: float = 0.0


@dataclass
class Plan:
    lines: list[Line]
    pairs: list[tuple[str, str]]
    settings: PlanSettings
    sources: dict[str, dict[str, str]] = field(default_factory=dict)  # model -> rate name -> source
    unpriced: list[str] = field(default_factory=list)

    def per_model(self) -> dict[str, Line]:
        out: dict[str, Line] = {}
        for ln in self.lines:
            t = out.setdefault(ln.model, Line(ln.model, "all", 0, 0, 0, 0.0))
            t.calls += ln.calls
            t.prompt_tokens += ln.prompt_tokens
            t.completion_tokens += ln.completion_tokens
            t.usd = None if t.usd is None or ln.usd is None else t.usd + ln.usd
            t.hours += ln.hours
        return out

    def total(self) -> Line:
        models = list(self.per_model().values())
        priced = [m.usd for m in models if m.usd is not None]
        return Line("total", "all", sum(m.calls for m in models), sum(m.prompt_tokens for m in models),
                    sum(m.completion_tokens for m in models), sum(priced) if priced else None,
                    self.hours())

    def hours(self) -> float:
        """Wall time: stages run one after another; within a stage, models run side by side."""
        stages: dict[str, float] = {}
        for ln in self.lines:
            stages[ln.stage] = max(stages.get(ln.stage, 0.0), ln.hours)
        return sum(stages.values())

    def to_dict(self) -> dict:
        per = self.per_model()
        return {"settings": vars(self.settings), "pairs": [list(p) for p in self.pairs], "unpriced": self.unpriced,
                "sources": self.sources, "lines": [vars(ln) for ln in self.lines],
                "models": {m: vars(ln) for m, ln in per.items()}, "total": vars(self.total())}


def _rate(measured: dict[str, Rate], name: str, default: float) -> Rate:
    return measured.get(name) or Rate(default, "default")


def authoring_prompt_tokens(settings: PlanSettings) -> float:
    """The authoring prompt's tokens, counted from its text as the simulated models count (~4 characters a
    token, 4 per message): the brief is fixed, so this figure needs no measurement."""
    from envduels_dagster.core.authoring import author_messages

    msgs = author_messages(0, settings.envs_per_author, seeds=list(range(settings.seeds)))
    return sum(len(m["content"]) for m in msgs) / 4 + 4 * len(msgs)


def play_prompt_tokens(turns: float, first: float, growth: float) -> float:
    """Mean prompt tokens per call of an episode of ``turns`` calls: call k (0-based) carries k earlier turns."""
    return first + growth * max(0.0, turns - 1) / 2


def price(entry: ModelEntry, prompt_tokens: float, completion_tokens: float) -> float | None:
    """List price from the registry; None when the registry gives the model no price."""
    if entry.input_cost_per_mtok <= 0 and entry.output_cost_per_mtok <= 0:
        return None
    return entry.cost(round(prompt_tokens), round(completion_tokens))


def _hours(entry: ModelEntry, calls: float, tokens: float, latency_s: float, concurrency: int) -> float:
    """Hours for ``calls`` at ``concurrency`` calls in flight, bounded below by the pool's rate limits."""
    seconds = calls * latency_s / max(1, concurrency)
    if entry.requests_per_minute:
        seconds = max(seconds, 60.0 * calls / entry.requests_per_minute)
    if entry.tokens_per_minute:
        seconds = max(seconds, 60.0 * tokens / entry.tokens_per_minute)
    return seconds / 3600.0


def plan_experiment(registry: Registry, settings: PlanSettings,
                    measured: dict[str, dict[str, Rate]] | None = None, episode_concurrency: int = 8) -> Plan:
    """The plan for ``registry`` at ``settings``; ``measured``: per model, rates that replace the defaults."""
    measured = measured or {}
    pairs = planned_pairs(registry)
    plan = Plan([], pairs, settings)
    k, n_seeds = settings.envs_per_author, settings.seeds
    author_prompt = authoring_prompt_tokens(settings)
    rates: dict[str, dict[str, Rate]] = {}
    for entry in registry.models:
        m = measured.get(entry.name, {})
        latency = 0.0 if entry.is_simulated else DEFAULTS["latency_s"]
        r = {name: _rate(m, name, default) for name, default in DEFAULTS.items() if name != "latency_s"}
        r["latency_s"] = _rate(m, "latency_s", latency)
        r["author_completion_tokens"] = Rate(min(r["author_completion_tokens"].value, entry.max_tokens),
                                             r["author_completion_tokens"].source)
        r["play_completion_tokens"] = Rate(min(r["play_completion_tokens"].value, entry.max_tokens),
                                           r["play_completion_tokens"].source)
        rates[entry.name] = r
        plan.sources[entry.name] = {name: rate.source for name, rate in r.items()}
        if price(entry, 1e6, 1e6) is None:
            plan.unpriced.append(entry.name)

    def add(entry: ModelEntry, stage: str, calls: float, prompt: float, completion: float, concurrency: int) -> None:
        lat = rates[entry.name]["latency_s"].value
        plan.lines.append(Line(entry.name, stage, calls, calls * prompt, calls * completion,
                               price(entry, calls * prompt, calls * completion),
                               _hours(entry, calls, calls * (prompt + completion), lat, concurrency)))

    for rnd in range(settings.rounds + 1):
        for entry in registry.models:
            if not entry.authors:
                continue
            r = rates[entry.name]
            completion = r["author_completion_tokens"].value
            if rnd == 0:  # one call per slot, one slot at a time
                add(entry, "authoring r0", k, author_prompt, completion, 1)
            else:  # one call per parent: the parent's source and a digest of how it was played
                add(entry, f"hardening r{rnd}", k, completion + r["harden_prompt_extra_tokens"].value, completion, 1)
        for author, solver in pairs:
            a, s = registry.get(author), registry.get(solver)
            ra, rs = rates[author], rates[solver]
            episodes = k * ra["validity"].value * n_seeds * settings.conditions
            turns = rs["turns"].value
            prompt = play_prompt_tokens(turns, rs["play_first_prompt_tokens"].value, rs["play_growth_tokens"].value)
            concurrency = min(episode_concurrency, s.max_in_flight or s.max_concurrency)
            add(s, f"play r{rnd}", episodes * turns, prompt, rs["play_completion_tokens"].value, concurrency)
            _ = a
    _merge_pair_lines(plan)
    return plan


def _merge_pair_lines(plan: Plan) -> None:
    """One line per (model, stage): a solver's pairs of a round add up (hours too: they share its pool)."""
    merged: dict[tuple[str, str], Line] = {}
    for ln in plan.lines:
        key = (ln.model, ln.stage)
        if key not in merged:
            merged[key] = ln
            continue
        t = merged[key]
        t.calls += ln.calls
        t.prompt_tokens += ln.prompt_tokens
        t.completion_tokens += ln.completion_tokens
        t.usd = None if t.usd is None or ln.usd is None else t.usd + ln.usd
        t.hours += ln.hours
    plan.lines = list(merged.values())


def fmt_usd(usd: float | None) -> str:
    return "unpriced" if usd is None else f"${usd:,.4f}" if usd < 1 else f"${usd:,.2f}"


def fmt_count(x: float) -> str:
    return f"{x:,.0f}" if x >= 10 or x == 0 else f"{x:.1f}"


def _is_finite(x: float) -> bool:
    return math.isfinite(x)
