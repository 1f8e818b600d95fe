"""The plan against the warehouse: rates measured by earlier runs, what a run actually used, and both side by side.

Why from the warehouse: every environment row records its authoring call's tokens and every episode
row its calls and tokens, cache hits included, so what an experiment used can be read back whatever
was cached or resumed. Dollars are recomputed at the registry's list price from those tokens (a cache
hit costs its list price too, as in ``author_value``), so a plan and its actual compare like for like.
"""

from __future__ import annotations

from envduels_dagster.core.models.registry import Registry
from envduels_dagster.core.requests.latency import measured_latency
from envduels_dagster.core.requests.plan import (
    DEFAULTS,
    FILL_RANGE,
    Authored,
    Line,
    Plan,
    Rate,
    fmt_count,
    fmt_usd,
    price,
)
from envduels_dagster.core.requests.turns import quantiles, turn_tables

MIN_MEASURED_ENVS = 5  # environments of an author before its measured rates replace the defaults
MIN_MEASURED_EPISODES = 20  # finished episodes of a solver (in a round kind) before its rates are measured


def _has_tables(conn) -> bool:
    """Whether the warehouse holds the tables read here (a read-only connection must not create them)."""
    found = {t for (t,) in conn.execute("SELECT table_name FROM information_schema.tables "
                                         "WHERE table_catalog = current_database()").fetchall()}
    return {"environments", "episodes"} <= found


def measured_rates(conn, registry: Registry, min_envs: int = MIN_MEASURED_ENVS,
                   min_episodes: int = MIN_MEASURED_EPISODES) -> dict[str, dict[str, Rate]]:
    """Per registry model, the rates earlier runs measured (enough rows only; the rest stay defaults)."""
    out: dict[str, dict[str, Rate]] = {m: {} for m in registry.names}
    if not _has_tables(conn):
        return {}
    envs = conn.execute("""
        SELECT author, round > 0 AS hardened, count(*), avg(valid::INT), sum(author_prompt_tokens),
               sum(author_completion_tokens), sum(author_calls)
        FROM environments WHERE author_calls > 0 GROUP BY ALL""").fetchall()
    for author, hardened, n, validity, prompt, completion, calls in envs:
        if author not in out or n < min_envs:
            continue
        src = f"measured ({n} environments)"
        if hardened:
            out[author].update({"harden_validity": Rate(float(validity), src),
                                "harden_prompt_tokens": Rate(prompt / calls, src),
                                "harden_completion_tokens": Rate(completion / calls, src)})
        else:
            out[author].update({"validity": Rate(float(validity), src),
                                "author_completion_tokens": Rate(completion / calls, src)})
    eps = conn.execute("""
        SELECT solver, round > 0 AS hardened, count(*), sum(model_calls), sum(prompt_tokens), sum(completion_tokens),
               sum(max_turns), list(model_calls / max_turns) FILTER (WHERE max_turns > 0)
        FROM episodes WHERE status <> 'incomplete' AND model_calls > 0 GROUP BY ALL""").fetchall()
    for solver, hardened, n, calls, prompt, completion, max_turns, fills in eps:
        if solver not in out or n < min_episodes:
            continue
        src, suffix = f"measured ({n} episodes)", "_hardened" if hardened else ""
        fill = calls / max_turns
        spread = quantiles([float(f) for f in fills or []])  # scaled to the fill's mean: calls stay fill x max_turns
        mean = sum(spread) / len(spread) if spread else 0.0
        out[solver].update({"turns" + suffix: Rate(calls / n, src), "play_prompt_tokens" + suffix: Rate(prompt / calls, src),
                            "turn_fill" + suffix: Rate(fill, src, tuple(f * fill / mean for f in spread) if mean else ())})
        if not hardened or "play_completion_tokens" not in out[solver]:
            out[solver]["play_completion_tokens"] = Rate(completion / calls, src)
    solvers = {m for m, r in out.items() if "turns" in r or "turns_hardened" in r}
    for solver, table in turn_tables(conn, solvers).items():  # no growth shape assumed (core/requests/turns.py)
        out[solver]["play_prompt_by_turn"] = Rate(float(len(table.prompts)), f"measured ({table.episodes} episodes: "
                                                  f"prompt by turn, turns 1-{len(table.prompts)})", table.prompts)
    remote = {m for m in out if not registry.get(m).is_simulated}  # in-process models take no call time
    for model, found in measured_latency(conn, remote).items():  # hours from measured calls (latency.py)
        out[model].update({name: Rate(seconds, src) for name, (seconds, src) in found.items()})
    return {m: r for m, r in out.items() if r}


def authored_environments(conn, registry: Registry) -> dict[tuple[str, int], Authored]:
    """Per (registry author, round): the environments already written, for ``plan_experiment(authored=...)``."""
    if not _has_tables(conn):
        return {}
    rows = conn.execute("""
        SELECT author, round, count(*), sum(valid::INT), avg(CASE WHEN valid THEN max_turns END),
               list(max_turns ORDER BY env_id) FILTER (WHERE valid)
        FROM environments GROUP BY ALL""").fetchall()
    names = set(registry.authors)
    return {(a, int(r)): Authored(int(n), int(v), float(mt or 0.0), tuple(int(x) for x in (lengths or [])))
            for a, r, n, v, mt, lengths in rows if a in names}


def actual_from_warehouse(conn, registry: Registry) -> list[Line]:
    """What the experiment used, per (model, stage), cache hits included, at list price (None: unpriced)."""
    if not _has_tables(conn):
        return []
    names = set(registry.names)
    rows = conn.execute("""
        SELECT author, CASE WHEN round = 0 THEN 'authoring r0' ELSE 'hardening r' || round END,
               sum(author_calls), sum(author_prompt_tokens), sum(author_completion_tokens)
        FROM environments GROUP BY ALL
        UNION ALL
        SELECT solver, 'play r' || round, sum(model_calls), sum(prompt_tokens), sum(completion_tokens)
        FROM episodes WHERE author IN (SELECT DISTINCT author FROM environments WHERE author_calls > 0)
        GROUP BY ALL""").fetchall()
    lines = []
    for model, stage, calls, prompt, completion in rows:
        if model in names:
            entry = registry.get(model)
            lines.append(Line(model, stage, float(calls or 0), float(prompt or 0), float(completion or 0),
                              price(entry, prompt or 0, completion or 0)))
    return sorted(lines, key=lambda ln: (ln.model, ln.stage))


def _pct(plan: float | None, actual: float | None) -> str:
    if plan is None or actual is None:
        return "n/a"
    if actual == 0:
        return "n/a" if plan == 0 else "+inf"
    return f"{100.0 * (plan - actual) / actual:+.0f}%"


def compare_rows(plan: dict, actual: list[Line]) -> list[dict]:
    """Per model and in total: planned and actual calls, tokens and dollars, and the plan's error in % of actual."""
    act: dict[str, dict] = {}
    for ln in actual:
        a = act.setdefault(ln.model, {"calls": 0.0, "tokens": 0.0, "usd": 0.0})
        a["calls"] += ln.calls
        a["tokens"] += ln.prompt_tokens + ln.completion_tokens
        a["usd"] = None if a["usd"] is None or ln.usd is None else a["usd"] + ln.usd
    rows = []
    for model, p in [*plan["models"].items(), ("total", plan["total"])]:
        if model == "total":
            a = {"calls": sum(x["calls"] for x in act.values()), "tokens": sum(x["tokens"] for x in act.values()),
                 "usd": sum(x["usd"] for x in act.values() if x["usd"] is not None)}
        else:
            a = act.get(model, {"calls": 0.0, "tokens": 0.0, "usd": 0.0 if p["usd"] is not None else None})
        tokens = p["prompt_tokens"] + p["completion_tokens"]
        rows.append({"model": model, "plan_calls": p["calls"], "actual_calls": a["calls"],
                     "calls_error": _pct(p["calls"], a["calls"]), "plan_tokens": tokens, "actual_tokens": a["tokens"],
                     "tokens_error": _pct(tokens, a["tokens"]), "plan_usd": p["usd"], "actual_usd": a["usd"],
                     "usd_error": _pct(p["usd"], a["usd"])})
    return rows


def format_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths)))
    body = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    return "\n".join([line, "-" * len(line), *body])


def format_plan(plan: Plan, registry: Registry, overall_budget: float | None) -> str:
    """The plan as the command prints it: per model, the total, where each rate came from, and the caps."""
    per = plan.per_model()
    rows = []
    for entry in registry.models:
        ln = per.get(entry.name)
        if ln is None:
            continue
        authoring = sum(x.calls for x in plan.lines if x.model == entry.name and not x.stage.startswith("play"))
        play = sum(x.calls for x in plan.lines if x.model == entry.name and x.stage.startswith("play"))
        cap = "-" if entry.budget_usd is None else f"${entry.budget_usd:g}"
        rows.append([entry.name, ",".join(entry.roles), fmt_count(authoring), fmt_count(play), fmt_count(ln.calls),
                     fmt_count(ln.prompt_tokens), fmt_count(ln.completion_tokens), fmt_usd(ln.usd),
                     f"{ln.hours:.2f}", cap])
    t = plan.total()
    rows.append(["total", "", "", "", fmt_count(t.calls), fmt_count(t.prompt_tokens), fmt_count(t.completion_tokens),
                 fmt_usd(t.usd) + (" + unpriced" if plan.unpriced and t.usd is not None else ""), f"{t.hours:.2f}",
                 "-" if overall_budget is None else f"${overall_budget:g}"])
    s = plan.settings
    out = [f"plan: {len(plan.pairs)} pairs ({len(registry.authors)} author(s) x {len(registry.solvers)} solver(s)), "
           f"{s.envs_per_author} environments per author, {s.seeds} seeds x {s.conditions} conditions, "
           f"{s.rounds} hardening round(s); dollars at the registry's list prices",
           format_table(["model", "roles", "authoring", "play", "calls", "prompt tok", "completion tok", "usd",
                         "hours", "budget"], rows)]
    if plan.span is not None:
        low, high = plan.span
        out.append(f"range: {fmt_count(low.calls)}-{fmt_count(high.calls)} calls, {fmt_usd(low.usd)}-{fmt_usd(high.usd)}: "
                   f"solver skill is unknown before play (turn_fill = calls / max_turns, default {DEFAULTS['turn_fill']:g}) "
                   f"and is taken from {FILL_RANGE[0]:g} (a strong solver) to {FILL_RANGE[1]:g} (every episode to "
                   "max_turns)" + ("" if any(k.startswith("environments") for src in plan.sources.values() for k in src)
                                   else "; environment lengths are the defaults' until the authors have written")
                   + "; 'envduels plan --pilot' measures both")
    if plan.unpriced:
        out.append(f"unpriced (no input/output_cost_per_mtok in the registry; not counted as $0): "
                   f"{', '.join(plan.unpriced)}")
    measured = {m: sorted({f"{k.split()[-1]} {v}" if k.startswith("environments") else v for k, v in src.items()
                           if v.startswith(("measured", "authored", "pilot-measured"))})
                for m, src in plan.sources.items()}
    measured = {m: v for m, v in measured.items() if v}
    out.append("rates: " + ("; ".join(f"{m} {', '.join(v)}" for m, v in measured.items()) + " (warehouse or pilot); "
                            if measured else "") + "defaults (docs/BENCHMARKS.md) for the rest: "
               + ", ".join(f"{k}={v:g}" for k, v in DEFAULTS.items()))
    out.append("hours: stages one after another, models side by side, at each pool's concurrency and rate "
               "limits; sandbox time and orchestration not included")
    over = [f"{e.name} (plan {fmt_usd(per[e.name].usd)} > budget_usd ${e.budget_usd:g})" for e in registry.models
            if e.budget_usd is not None and e.name in per and (per[e.name].usd or 0) > e.budget_usd]
    if overall_budget is not None and t.usd is not None and t.usd > overall_budget:
        over.append(f"the total (plan {fmt_usd(t.usd)} > ENVDUELS_BUDGET_USD ${overall_budget:g})")
    if over:
        out.append("over budget: " + "; ".join(over) + ": the cap will stop play part-way (episodes stopped at "
                   "budget are marked and left out of every statistic)")
    return "\n".join(out)


def format_compare(rows: list[dict]) -> str:
    body = [[r["model"], fmt_count(r["plan_calls"]), fmt_count(r["actual_calls"]), r["calls_error"],
             fmt_count(r["plan_tokens"]), fmt_count(r["actual_tokens"]), r["tokens_error"], fmt_usd(r["plan_usd"]),
             fmt_usd(r["actual_usd"]), r["usd_error"]] for r in rows]
    return format_table(["model", "plan calls", "actual", "error", "plan tokens", "actual", "error", "plan usd",
                         "actual", "error"], body)
