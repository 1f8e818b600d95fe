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

from envduels_dagster.core.models.registry import ModelEntry, Registry

# Documented defaults, used for a model with no measured runs: pooled over the five simulated models on a
# calibration run at the default experiment's size that is not the demo (10 environments per author, 4 seeds,
# so other environments than the demo's 8-seed brief; one hardening round: 50 + 50 authoring calls, 3,560
# episodes; docs/BENCHMARKS.md "Plan against actual"). Play prompts are a mean *per call*: a solver's prompt is
# the whole conversation so far, and long episodes (mazes run to 35 turns) hold most of the calls, so the mean
# is well above the first prompt (~105 tokens). One real model measured 6.7 calls per episode (issue 30).
DEFAULTS = {
    "validity": 0.88,  # share of written environments that validate (and get played)
    "author_completion_tokens": 560.0,  # one environment class with its hint and metadata
    "harden_prompt_tokens": 1035.0,  # the hardening digest: the parent's source, pass rates, failure excerpts
    "harden_completion_tokens": 480.0,  # a rewritten class, or a short "keep" reply
    "harden_validity": 0.90,
    "turns": 9.5,  # model calls per episode, round 0
    "turns_hardened": 10.4,  # model calls per episode on hardened environments
    "play_prompt_tokens": 406.0,  # mean prompt tokens per play call, round 0
    "play_prompt_tokens_hardened": 434.0,
    "play_completion_tokens": 6.8,  # a short line and a \\boxed{} action
    # Once environments are written, an episode's length is known better: calls per episode = turn_fill x the
    # author's mean max_turns (a failing episode runs to max_turns, a won one stops early).
    "turn_fill": 0.86,
    "turn_fill_hardened": 0.885,
    # ... and an episode of T calls sends T * first + growth * T(T-1)/2 prompt tokens (each call carries every
    # earlier turn): least squares over the calibration's episodes, 105 / 29 at 6 and at 10 environments alike.
    "play_first_prompt_tokens": 105.0,
    "play_growth_tokens": 29.0,
    "latency_s": 2.0,  # per play call of a remote model (simulated models in-process: 0)
    # per authoring or hardening call of a remote model: a real one writes a whole class, 1-5 minutes (issue 41)
    "author_latency_s": 60.0,
}
RATE_NAMES = tuple(DEFAULTS)

# What a plan cannot know before play: how skilled each solver is. It sets ``turn_fill`` (calls / max_turns: a
# won episode stops early, a failing one runs to max_turns), so a plan whose solvers' fill is a default states a
# range: from a solver as strong as the strongest simulated profile (oracle's 0.69 on the demo) to 1.0, a solver
# that never wins (every episode to max_turns: no solver costs more). A pilot measures it (``--pilot``).
FILL_RANGE = (0.69, 1.0)


def planned_pairs(registry: Registry) -> list[tuple[str, str]]:
    """(author, solver) for every author-role model x every solver-role model, in registry order: the roster's
    round-0 pairs of the registry's own models (imports are free to author; their play is planned apart)."""
    from envduels_dagster.core.requests.roster import Roster

    return Roster.from_registry(registry, check=False).pairs(0)


@dataclass(frozen=True)
class PlanSettings:
    envs_per_author: int = 10
    seeds: int = 8
    rounds: int = 1  # hardening rounds after round 0
    conditions: int = 2  # cold and hinted
    play_envs: int | None = None  # environments played per pair (a pilot's slice); None: every valid one
    author_wave: int = 4  # authoring slots whose calls go out together (ENVDUELS_AUTHOR_WAVE)


@dataclass(frozen=True)
class Rate:
    value: float
    source: str  # "measured (n=...)" or "default"
    # a rate measured as a series (core/requests/turns.py): prompt tokens by turn index, or turn fills' quantiles
    series: tuple[float, ...] = ()


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
    # (low, high) totals when some solver's turn_fill is a default (its skill unknown), from FILL_RANGE
    span: tuple[Line, Line] | None = None

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
                "models": {m: vars(ln) for m, ln in per.items()}, "total": vars(self.total()),
                "range": None if self.span is None else {"fill": list(FILL_RANGE), "low": vars(self.span[0]),
                                                         "high": vars(self.span[1])}}


def authoring_prompt_tokens(settings: PlanSettings) -> float:
    """The authoring prompt's tokens, counted from its text as the simulated models count (~4 characters a
    token, 4 per message): the brief is fixed, so this figure needs no measurement."""
    from envduels_dagster.core.authoring.prompts import author_messages

    msgs = author_messages(0, settings.envs_per_author, seeds=list(range(settings.seeds)))
    return sum(len(m["content"]) for m in msgs) / 4 + 4 * len(msgs)


def price(entry: ModelEntry, prompt_tokens: float, completion_tokens: float) -> float | None:
    """List price from the registry; None when the registry gives the model no price."""
    if entry.input_cost_per_mtok <= 0 and entry.output_cost_per_mtok <= 0:
        return None
    return entry.cost(round(prompt_tokens), round(completion_tokens))


def _hours(entry: ModelEntry, calls: float, tokens: float, latency_s: float, concurrency: float) -> float:
    """Hours for ``calls`` at ``concurrency`` calls in flight, bounded below by the pool's rate limits."""
    seconds = calls * latency_s / max(1.0, concurrency)
    if entry.requests_per_minute:
        seconds = max(seconds, 60.0 * calls / entry.requests_per_minute)
    if entry.tokens_per_minute:
        seconds = max(seconds, 60.0 * tokens / entry.tokens_per_minute)
    return seconds / 3600.0


@dataclass(frozen=True)
class Authored:
    """An author's environments of one round, already in the warehouse: how many validated, how long they run."""

    written: int
    valid: int
    mean_max_turns: float  # over the valid ones
    max_turns: tuple[int, ...] = ()  # of each valid one


def plan_experiment(registry: Registry, settings: PlanSettings,
                    measured: dict[str, dict[str, Rate]] | None = None, episode_concurrency: int = 8,
                    authored: dict[tuple[str, int], Authored] | None = None) -> Plan:
    """The plan for ``registry`` at ``settings``; ``measured``: per model, rates that replace the defaults;
    ``authored``: per (author, round), environments already written (their play is then planned from them).
    When a solver's skill is unknown (its turn_fill a default), ``span`` holds the totals at FILL_RANGE."""
    plan = _plan(registry, settings, measured, episode_concurrency, authored)
    if any(src.get("turn_fill", "default").startswith("default") for m, src in plan.sources.items()
           if m in {s for _, s in plan.pairs}):
        low, high = (_plan(registry, settings, measured, episode_concurrency, authored, fill).total()
                     for fill in FILL_RANGE)
        plan.span = (low, high)
    return plan


def _plan(registry: Registry, settings: PlanSettings, measured: dict[str, dict[str, Rate]] | None,
          episode_concurrency: int, authored: dict[tuple[str, int], Authored] | None,
          fill: float | None = None) -> Plan:
    """``fill``: the turn_fill of every solver whose fill is a default (None: the default itself)."""
    measured, authored = measured or {}, authored or {}
    pairs = planned_pairs(registry)
    plan = Plan([], pairs, settings)
    k, n_seeds = settings.envs_per_author, settings.seeds
    author_prompt = authoring_prompt_tokens(settings)
    rates = {e.name: with_fill(model_rates(e, measured.get(e.name, {})), fill) for e in registry.models}
    for entry in registry.models:
        plan.sources[entry.name] = {name: rate.source for name, rate in rates[entry.name].items()}
        if price(entry, 1e6, 1e6) is None:
            plan.unpriced.append(entry.name)

    def add(entry: ModelEntry, stage: str, calls: float, prompt: float, completion: float, concurrency: float) -> None:
        lat = rates[entry.name]["latency_s" if stage.startswith("play") else "author_latency_s"].value
        plan.lines.append(Line(entry.name, stage, calls, calls * prompt, calls * completion,
                               price(entry, calls * prompt, calls * completion),
                               _hours(entry, calls, calls * (prompt + completion), lat, concurrency)))

    for rnd in range(settings.rounds + 1):
        suffix = "" if rnd == 0 else "_hardened"
        for entry in registry.models:
            r = rates[entry.name]
            if not entry.authors:
                continue
            # every author at once; an author's slots go in waves of calls made together (core/authoring/plan.py),
            # its hardening calls all together, each within the pool's calls in flight: wall time is whole waves
            pool = entry.max_in_flight or entry.max_concurrency
            if rnd == 0:  # one call per slot
                add(entry, "authoring r0", k, author_prompt, r["author_completion_tokens"].value,
                    _waves(k, min(settings.author_wave, pool)))
            else:  # one call per parent (valid or not): its source and a digest of how it was played
                add(entry, f"hardening r{rnd}", k, r["harden_prompt_tokens"].value, r["harden_completion_tokens"].value,
                    _waves(k, pool))
        for author, solver in pairs:
            s, ra, rs = registry.get(solver), rates[author], rates[solver]
            written = authored.get((author, rnd))
            concurrency = min(episode_concurrency, s.max_in_flight or s.max_concurrency)
            if written is not None:  # its environments exist: their number and length are known
                plan.sources[author][f"environments r{rnd}"] = (f"authored ({written.valid} of {written.written} "
                                                                f"valid, mean max_turns {written.mean_max_turns:.1f})")
                calls, prompt = _authored_play(written, rs, suffix, n_seeds * settings.conditions, settings.play_envs)
                if calls > 0:
                    add(s, f"play r{rnd}", calls, prompt / calls, rs["play_completion_tokens"].value, concurrency)
                continue
            valid = k * ra["validity" if rnd == 0 else "harden_validity"].value
            episodes = min(valid, settings.play_envs or valid) * n_seeds * settings.conditions
            add(s, f"play r{rnd}", episodes * rs["turns" + suffix].value, rs["play_prompt_tokens" + suffix].value,
                rs["play_completion_tokens"].value, concurrency)
    _merge_pair_lines(plan)
    return plan


def _waves(calls: int, at_once: int) -> float:
    """The concurrency that makes ``calls`` in whole waves of ``at_once`` take as long as those waves."""
    return calls / max(1, math.ceil(calls / max(1, at_once)))


def _authored_play(written: Authored, rs: dict[str, Rate], suffix: str, per_env: int,
                   play_envs: int | None = None) -> tuple[float, float]:
    """Calls and prompt tokens of playing ``written``'s environments (``play_envs`` of them, spread over their
    lengths, when given): T = turn_fill x max_turns calls an episode, each carrying the earlier turns (a long
    environment costs more per call, not only more calls)."""
    fill, first, growth = (rs["turn_fill" + suffix].value, rs["play_first_prompt_tokens"].value,
                           rs["play_growth_tokens"].value)
    lengths = list(written.max_turns or (written.mean_max_turns,) * written.valid)
    if play_envs is not None:
        lengths = [lengths[i] for i in spread(lengths, play_envs)]
    turns = [fill * mt for mt in lengths]
    by_turn = rs.get("play_prompt_by_turn")
    if by_turn is not None and by_turn.series:  # measured call by call: no growth shape assumed (turns.py)
        from envduels_dagster.core.requests.turns import TurnTable, planned_prompt

        table = TurnTable(by_turn.series, (), 0)
        fills = rs["turn_fill" + suffix].series or (fill,)
        return per_env * sum(turns), per_env * sum(planned_prompt(table, fills, mt) for mt in lengths)
    return (per_env * sum(turns), per_env * sum(t * first + growth * t * max(0.0, t - 1) / 2 for t in turns))


def spread(lengths: list, n: int) -> list[int]:
    """Indices of ``n`` of ``lengths`` evenly spread from the shortest to the longest (a pilot's slice: turn_fill
    is a ratio to max_turns, and a slice of only short or only long environments would bias it)."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    if n >= len(order):
        return sorted(order)
    if n == 1:
        return [order[len(order) // 2]]
    return sorted(order[round(j * (len(order) - 1) / (n - 1))] for j in range(n))


def with_fill(rates: dict[str, Rate], fill: float | None) -> dict[str, Rate]:
    """``rates`` with a solver of turn_fill ``fill`` where its fill is a default (its skill unknown).

    Calls per episode scale with the fill (T = fill x max_turns), and so does the prompt per call: an episode
    of T calls sends T x first + growth x T(T-1)/2 prompt tokens, so over episodes the mean prompt per call is
    first + growth x (E[T^2]/E[T] - 1) / 2, and E[T^2]/E[T] scales with the fill. Measured turns stay."""
    if fill is None:
        return rates
    out = dict(rates)
    first, growth = rates["play_first_prompt_tokens"].value, rates["play_growth_tokens"].value
    for suffix in ("", "_hardened"):
        base = rates["turn_fill" + suffix]
        if not base.source.startswith("default"):
            continue
        out["turn_fill" + suffix] = Rate(fill, f"assumed (range {FILL_RANGE[0]:g}-{FILL_RANGE[1]:g})")
        turns, prompt = rates["turns" + suffix], rates["play_prompt_tokens" + suffix]
        if turns.source.startswith("default") and prompt.source.startswith("default") and growth > 0:
            ratio = fill / base.value
            t2_over_t = 2 * (prompt.value - first) / growth + 1  # E[T^2]/E[T] at the default fill
            out["turns" + suffix] = Rate(turns.value * ratio, out["turn_fill" + suffix].source)
            out["play_prompt_tokens" + suffix] = Rate(first + growth * (t2_over_t * ratio - 1) / 2,
                                                      out["turn_fill" + suffix].source)
    return out


def model_rates(entry: ModelEntry, measured: dict[str, Rate]) -> dict[str, Rate]:
    """Every rate of ``entry``: measured where given, else the default (token figures capped by max_tokens)."""
    rates = {name: measured.get(name) or Rate(default, "default") for name, default in DEFAULTS.items()}
    if "play_prompt_by_turn" in measured:  # prompt tokens by turn index (core/requests/turns.py)
        rates["play_prompt_by_turn"] = measured["play_prompt_by_turn"]
    for name in ("turns", "play_prompt_tokens", "turn_fill"):  # a pilot without rounds: scale its round-0 figure
        if name in measured and name + "_hardened" not in measured:
            ratio = DEFAULTS[name + "_hardened"] / DEFAULTS[name]
            rates[name + "_hardened"] = Rate(measured[name].value * ratio, measured[name].source + " x default ratio",
                                             tuple(min(1.0, x * ratio) for x in measured[name].series))
    for name in ("latency_s", "author_latency_s"):
        if name not in measured and entry.is_simulated:
            rates[name] = Rate(0.0, "default (in-process)")
    for name in ("author_completion_tokens", "harden_completion_tokens", "play_completion_tokens"):
        rates[name] = Rate(min(rates[name].value, entry.max_tokens), rates[name].source)
    return rates


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
