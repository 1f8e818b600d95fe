"""Text for the UI: Markdown tables, the author x solver lift grid, the transitivity summary.

Why in core: these are pure functions of result frames, shown as materialization metadata
by the Dagster layer but equally useful in a notebook or the CLI, and testable without
Dagster. Nothing here imports pandas: a frame is read through its public methods.
"""

from __future__ import annotations

import math


def markdown_table(df, floatfmt: str = ".2f", max_rows: int = 50) -> str:
    if df.empty:
        return "_no rows_"
    df = df.head(max_rows)
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        cells = [format(v, floatfmt) if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fmt(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def finite_or_none(x) -> float | None:
    """``x`` as a finite float, or None: the one helper, ``core.stats.rounding.as_float`` (issue 47)."""
    from envduels_dagster.core.stats.rounding import as_float

    return as_float(x)


def lift_grid(pair, tests=None) -> str:
    """Author x solver Markdown grid: lift [lift_ci_lower, lift_ci_upper] (the published Student-t interval; "n/a"
    when the mart gives none); self pairs in italics (excluded from peer metrics). ``tests``: the
    ``lift_grid_tests`` frame; a peer cell is bold when "lift > 0" is decided after its multiple-comparison
    control, and the legend names the method."""
    if pair.empty:
        return "_no pairs_"
    authors = sorted(pair["author"].unique())
    solvers = sorted(pair["solver"].unique())
    cells = {(r.author, r.solver): r for r in pair.itertuples(index=False)}
    decided = set() if tests is None else {(r.author, r.solver) for r in tests.itertuples(index=False) if r.decided}
    lines = ["| author \\ solver | " + " | ".join(solvers) + " |", "|---|" + "---|" * len(solvers)]
    for a in authors:
        row = []
        for s in solvers:
            r = cells.get((a, s))
            if r is None:
                row.append("")
                continue
            lo, hi = finite_or_none(r.lift_ci_lower), finite_or_none(r.lift_ci_upper)
            text = f"{r.lift:+.2f} " + (f"[{lo:+.2f}, {hi:+.2f}]" if lo is not None and hi is not None else "[n/a]")
            row.append(f"_{text}_" if a == s else (f"**{text}**" if (a, s) in decided else text))
        lines.append(f"| **{a}** | " + " | ".join(row) + " |")
    lines.append("")
    if tests is None:
        lines.append("95% Student-t intervals over environments. Italic: self pair (not a peer result).")
    else:
        method = tests["method"].iloc[0] if len(tests) else "none"
        n_family = int(tests.loc[~tests["is_self_pair"].astype(bool), "p_value"].notna().sum())
        lines.append(f"95% Student-t intervals over environments ([n/a]: too few environments or no spread). "
                     f"Bold: lift > 0 decided (one-sided t test over environments, {method} over the "
                     f"{n_family} peer pairs tested). Italic: self pair (not a peer result).")
    return "\n".join(lines)


def _interval(s, name: str) -> str:
    """" [95% lower, upper]", or the reason the interval is withheld (summary rows without it: nothing)."""
    reason = getattr(s, f"{name}_reason", None)
    if isinstance(reason, str):
        return f" (no interval: {reason})"
    lo, hi = getattr(s, f"{name}_lower", None), getattr(s, f"{name}_upper", None)
    return "" if lo is None else f" [95% {fmt(lo)}, {fmt(hi)}]"


def transitivity_markdown(s) -> str:
    """The duel tournament's transitivity and the role separation, from one ``rankings_summary`` row."""
    boot = getattr(s, "tournament_n_boot", None)
    method = (f"\n\nIntervals: {s.tournament_interval_method}; {int(boot)} replicates; the fewest "
              f"environments of an author: {int(s.tournament_min_envs_per_author)}. Duels: "
              f"{s.tournament_decision_control}.") if boot is not None else ""
    population = ""
    if getattr(s, "population_decision_control", None) is not None:
        reason = getattr(s, "population_interval_reason", None)
        population = (f"\n\n**Bounds on the infinite-environment tournament** (every duel decided by the sign of "
                      f"its population lift difference; {s.population_decision_control}; "
                      f"{int(s.population_undecided_pairs)} of {int(s.n_duels)} duels undetermined): "
                      + (f"no bounds: {reason}" if isinstance(reason, str) else
                         f"zeta in [{fmt(s.kendall_zeta_population_lower)}, {fmt(s.kendall_zeta_population_upper)}],"
                         f" cyclic triads in [{fmt(s.cyclic_triads_population_lower)}, "
                         f"{fmt(s.cyclic_triads_population_upper)}]; per model: bt_strength_population_lower/upper "
                         "and bt_rank_population_lower/upper of table rankings"))
    separated = ("\n* Bradley-Terry: a model or group never dropped a point to the rest (separated): its "
                 "strength is set by the prior") if getattr(s, "bt_separated", None) is True else ""
    return (
        f"**Transitivity of the duel tournament** ({int(s.n_duels)} duels, {int(s.n_decisive_duels)} decisive; "
        f"a tie counts half a win to each side){method}\n\n"
        f"* cyclic triads c = {fmt(s.cyclic_triads)}{_interval(s, 'cyclic_triads')} of at most "
        f"{fmt(s.cyclic_triads_max)}\n"
        f"* Kendall's zeta = 1 - c/c_max = {fmt(s.kendall_zeta)}{_interval(s, 'kendall_zeta')} "
        f"(1 = perfectly transitive){separated}{population}\n\n"
        f"**Role separation** (solver rank vs author rank, {int(s.role_n_models)} models)\n\n"
        f"* Spearman rho = {fmt(s.role_rho)}{_interval(s, 'role_rho')}, "
        f"permutation p = {fmt(s.role_p_value, 3)} ({int(s.role_n_permutations)} permutations)\n"
    )
