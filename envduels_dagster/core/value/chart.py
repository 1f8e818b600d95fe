"""The author-value answer as a picture and as one sentence per learner.

Why SVG written by hand: the chart must render offline (no plotting service, no fonts
to download), inside the Dagster UI's Markdown and as a file, and stay diffable in tests.
Why the sentence lives here: the demo, the UI and the README say the same thing the same
way, with intervals and sample sizes, and "insufficient data" / "no price" where due.
"""

from __future__ import annotations

import base64
import math
from html import escape

import numpy as np
import pandas as pd

from envduels_dagster.core.value.author_value import INSUFFICIENT, RANKED, SELF, UNPRICED

PANELS = [("per_env", "learnable per environment slot"), ("per_usd", "learnable per US dollar"),
          ("per_kcall", "learnable per 1000 calls")]


def _est(x, lower, upper) -> str:
    """``x [lower, upper]`` rounded to what the interval justifies (``core.stats.rounding``); ``x [n/a, n/a]`` by
    ``_fmt`` without an interval."""
    from envduels_dagster.core.stats.rounding import format_estimate, interval_decimals

    if interval_decimals(lower, upper) is None:
        return f"{_fmt(x)} [{_fmt(lower)}, {_fmt(upper)}]"
    return format_estimate(x, lower, upper)


def _fmt(x: float) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    return f"{x:.2f}" if abs(x) < 10 else f"{x:.1f}" if abs(x) < 100 else f"{x:.0f}"


COLOURS = {"ranked": ("#3572b0", "blue: ranked"), "self": ("#999", "grey: self-authored (shown, not ranked)"),
           "other": ("#c9a227", "yellow: insufficient data or no price (not ranked)")}
LABEL_CHARS = 24  # an author label longer than this is cut (full name on hover): it ran into the first panel


def value_svg(table: pd.DataFrame, learner: str) -> str:
    """Horizontal bars with 95% whiskers, one row per author, one panel per figure, each panel with its axis.

    Layout (issue 43): the estimate is written in a column of its own at the panel's right (beside the whisker's
    end it read as the upper bound); a bar or whisker past the panel's scale (only the self-authored row can be)
    stops at the panel's end with an arrow instead of running into the next panel; the caption names only the
    colours and marks drawn."""
    rows = table.sort_values(["is_self", "rank", "author"], na_position="last").reset_index(drop=True)
    label_w, panel_w, value_w, row_h, top = 190, 270, 58, 26, 56
    plot_w = panel_w - value_w - 12
    body_h = row_h * max(len(rows), 1)
    width, height = label_w + panel_w * len(PANELS) + 20, top + body_h + 58
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="8" y="18" font-size="14" font-weight="bold">Which author to pay, for learner '
           f'{escape(learner)}</text>']
    used, whiskers, clipped_any = set(), 0, False
    for p, (col, title) in enumerate(PANELS):
        x0 = label_w + p * panel_w
        vmax = panel_scale(rows, col)
        scale = plot_w / vmax
        end_x = x0 + plot_w
        out.append(f'<text x="{x0}" y="{top - 14}" font-weight="bold">{escape(title)}</text>')
        out.append(f'<text x="{x0 + panel_w - 8}" y="{top - 2}" text-anchor="end" fill="#555" font-size="11">'
                   "estimate</text>")
        axis_y = top + body_h + 2
        out.append(f'<g class="axis"><line x1="{x0}" y1="{top - 6}" x2="{x0}" y2="{axis_y}" stroke="#888"/>'
                   f'<line x1="{x0}" y1="{axis_y}" x2="{end_x}" y2="{axis_y}" stroke="#888"/>')
        for frac in (0.0, 0.5, 1.0):
            tx = x0 + frac * plot_w
            out.append(f'<line x1="{tx:.1f}" y1="{axis_y}" x2="{tx:.1f}" y2="{axis_y + 4}" stroke="#888"/>'
                       f'<text class="tick" x="{tx:.1f}" y="{axis_y + 15}" text-anchor="middle" font-size="10" '
                       f'fill="#555">{_fmt(frac * vmax)}</text>')
        out.append("</g>")
        for i, r in rows.iterrows():
            y = top + i * row_h
            est, lo, hi = r[col], r[f"{col}_lower"], r[f"{col}_upper"]
            if est is None or not math.isfinite(est):
                note = "no price" if col == "per_usd" and not r["priced"] else "no data"
                out.append(f'<text x="{x0 + 4}" y="{y + 15}" fill="#a33">{note}</text>')
                continue
            kind = "self" if r["status"] == SELF else "ranked" if r["status"] == RANKED else "other"
            used.add(kind)
            colour = COLOURS[kind][0]
            clipped = est > vmax  # only a row that does not set the scale (self-authored) can pass its end
            clipped_any |= clipped
            bar_w = plot_w if clipped else max(est * scale, 1)
            faded = ' opacity="0.5"' if clipped else ""
            out.append(f'<rect class="bar{" clipped" if clipped else ""}" x="{x0}" y="{y + 4}" width="{bar_w:.1f}" '
                       f'height="{row_h - 10}" fill="{colour}"{faded}><title>'
                       f'{escape(str(r["author"]))}: {_fmt(est)} [{_fmt(lo)}, {_fmt(hi)}]'
                       f'{" (off the scale, not ranked)" if clipped else ""}</title></rect>')
            if clipped:
                out.append(f'<text x="{end_x - 2:.1f}" y="{y + 15}" text-anchor="end" fill="white" '
                           'font-weight="bold">&#9654;</text>')
            elif math.isfinite(lo) and math.isfinite(hi):
                whiskers += 1
                yc = y + row_h / 2 - 1
                x_lo, x_hi = x0 + min(lo, vmax) * scale, x0 + min(hi, vmax) * scale
                out.append(f'<line class="whisker" x1="{x_lo:.1f}" y1="{yc}" x2="{x_hi:.1f}" y2="{yc}" '
                           'stroke="black" stroke-width="1.5"/>')
                for xv, v in ((x_lo, lo), (x_hi, hi)):
                    if v <= vmax:
                        out.append(f'<line x1="{xv:.1f}" y1="{yc - 5}" x2="{xv:.1f}" y2="{yc + 5}" stroke="black" '
                                   'stroke-width="1.5"/>')
                if hi > vmax:
                    clipped_any = True
                    out.append(f'<text x="{end_x:.1f}" y="{yc + 4}" font-size="10">&#9654;</text>')
            out.append(f'<text class="value" x="{x0 + panel_w - 8}" y="{y + 15}" text-anchor="end">'
                       f"{_fmt(est)}</text>")
    for i, r in rows.iterrows():
        tag = (f"#{int(r['rank'])}" if pd.notna(r["rank"]) else "self" if r["status"] == SELF
               else "no price" if r["status"] == UNPRICED else "n<min")
        name = str(r["author"])
        short = name if len(name) <= LABEL_CHARS else name[:LABEL_CHARS - 1] + "…"
        out.append(f'<text class="label" x="8" y="{top + i * row_h + 15}">{escape(short)} ({escape(tag)}, '
                   f'n={int(r["n_envs"])})<title>{escape(name)}</title></text>')
    marks = ["bars: estimate"] + (["whiskers: 95% interval"] if whiskers else []) + (
        ["▶: past the scale"] if clipped_any else [])
    legend = [COLOURS[k][1] for k in ("ranked", "self", "other") if k in used]
    basis = escape(str(rows["rank_basis"].iloc[0] if len(rows) else ""))
    out.append(f'<text class="caption" x="8" y="{height - 22}" fill="#555">{"; ".join(marks)}. '
               f'{escape("; ".join(legend))}.</text>')
    out.append(f'<text class="caption" x="8" y="{height - 7}" fill="#555">Ranked by {basis}; each axis runs from '
               "0 to the largest upper bound of the authors other than the learner.</text>")
    out.append("</svg>")
    return "\n".join(out)


def panel_scale(rows: pd.DataFrame, col: str) -> float:
    """The panel's full scale: the largest upper bound (or estimate, without one) of the rows that are not
    self-authored. The learner's own row is shown, not ranked, and must not set the scale: its per-dollar
    figure was 448 beside ranked authors at 135, 52, 6.5 and 1.34, which left the fourth bar invisible."""
    values = []
    for r in rows[rows["status"] != SELF].itertuples(index=False):
        for v in (getattr(r, f"{col}_upper"), getattr(r, col)):
            if v is not None and not pd.isna(v) and math.isfinite(v):
                values.append(float(v))
                break
    return max(values or [1.0]) or 1.0


BAR_WIDTH = 20  # character cells of a text bar at full scale
BAR_LEGEND = ("\u2588 up to the 95% interval's lower bound, \u2593 to the estimate, \u2591 to the upper bound "
              "(no interval: \u2593 alone). Scale: the largest upper bound of the authors other than the learner; "
              "its own row (not ranked) ends in \u25b6 when it is off the scale.")


def text_bar(est: float | None, lower: float | None, upper: float | None, scale: float, width: int = BAR_WIDTH) -> str:
    """One horizontal bar drawn with block characters (a chart a table cell can hold, as the Dagster UI shows
    metadata tables inline and hides long Markdown, such as an image, behind a button): solid to the interval's
    lower bound, dark shade to the estimate, light shade to the upper bound. Off the scale: full, then an arrow.
    Empty without an estimate."""
    def finite(x) -> bool:
        return x is not None and not pd.isna(x) and math.isfinite(x)

    if not finite(est) or not scale > 0:
        return ""

    def cells(x: float) -> int:
        return max(0, min(width, round(float(x) / scale * width)))

    if est > scale:
        return "\u2588" * width + "\u25b6"
    mid = cells(est)
    low = min(cells(lower), mid) if finite(lower) else 0  # no interval: the estimate alone, in dark shade
    high = max(cells(upper), mid) if finite(upper) else mid
    return "\u2588" * low + "\u2593" * (mid - low) + "\u2591" * (high - mid) + " " * (width - high)


def value_bars(table: pd.DataFrame) -> list[dict]:
    """The author-value chart as rows of text: per author (ranked first, by rank; then those listed apart; the
    learner's own row last) its status and one bar per panel of ``value_svg``, each followed by the estimate and
    its 95% interval, rounded to what the interval justifies (``core.stats.rounding``)."""
    from envduels_dagster.core.stats.rounding import format_estimate

    rows = table.assign(_self=table["status"] == SELF).sort_values(["_self", "rank", "author"], na_position="last")
    scales = {col: panel_scale(rows, col) for col, _ in PANELS}
    out = []
    for r in rows.to_dict("records"):
        tag = (f"#{int(r['rank'])} [{int(r['rank_lower'])}-{int(r['rank_upper'])}]" if pd.notna(r["rank"])
               else str(r["status"]))
        row = {"author": str(r["author"]), "rank": tag, "n_envs": int(r["n_envs"])}
        for col, _ in PANELS:
            est, lo, hi = r[col], r[f"{col}_lower"], r[f"{col}_upper"]
            if est is None or pd.isna(est):
                row[col] = "no price" if col == "per_usd" and not r["priced"] else "no data"
                continue
            off = " (off scale)" if est > scales[col] else ""
            row[col] = f"{text_bar(est, lo, hi, scales[col])} {format_estimate(est, lo, hi)}{off}"
        out.append(row)
    return out


def svg_data_uri(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def value_summary(table: pd.DataFrame, mix: pd.DataFrame) -> list[str]:
    """``value_sentence`` for every learner of the ``author_value`` / ``author_value_mix`` tables."""
    return [value_sentence(table[table["learner"] == learner], mix[mix["learner"] == learner], learner)
            for learner in sorted(table["learner"].unique())]


def more_envs_command(n: int) -> str:
    """What to run for ``n`` environments per author (the environments already written come from the call cache)."""
    return (f"`envduels plan --envs-per-author {n}` prices it, `envduels run --envs-per-author {n}` runs it (or "
            f"`envduels run --until-decided` stops when decided; what is already written and played comes from the "
            f"call cache)")


def _per_learnable(r, basis: str) -> str:
    """Cost of one learnable environment: 1 / per_usd (dollars) or 1000 / per_kcall (calls), interval inverted."""
    from envduels_dagster.core.stats.rounding import format_estimate

    est, lo, hi = (getattr(r, basis), getattr(r, f"{basis}_lower"), getattr(r, f"{basis}_upper"))
    scale = 1.0 if basis == "per_usd" else 1000.0

    def inv(x):
        return scale / x if x is not None and pd.notna(x) and x > 0 else None

    if inv(est) is None:
        return "no learnable environment yet"
    upper = inv(lo)
    text = format_estimate(inv(est), inv(hi), upper) if upper is not None else \
        f"{format_estimate(inv(est))} [{format_estimate(inv(hi))}, no upper bound]"
    return (f"${text}" if basis == "per_usd" else f"{text} calls") + " per learnable environment"


def value_sentence(table: pd.DataFrame, mix: pd.DataFrame, learner: str, min_envs: int = 4) -> str:
    """One line per learner that a person can act on: the decision first (pay X, or not yet and what it takes),
    with p_best, the runner-up, the cost per learnable environment and the environments behind it; then the
    other ranked authors, the budget mix and the authors listed apart. A decision needs p_best >= 0.9
    (``core.value.decision.TARGET``)."""
    from envduels_dagster.core.value import decision

    if table.empty:
        return (f"for {learner}: insufficient data (no environments written yet): every author needs {min_envs} "
                f"environments played by {learner}; {more_envs_command(min_envs)}")
    ranked = table[table["status"] == RANKED].sort_values("rank")
    if ranked.empty:
        short = table[(table["status"] == INSUFFICIENT)].sort_values("author")
        need = ", ".join(f"{r.author} has {int(r.n_envs)} ({min_envs - int(r.n_envs)} more)"
                         for r in short.itertuples(index=False))
        slots = max([int(r.n_slots) + min_envs - int(r.n_envs) for r in short.itertuples(index=False)] or [min_envs])
        return (f"for {learner}: insufficient data: every author needs {min_envs} environments played by {learner}"
                f"{': ' + need if need else ''}; {more_envs_command(slots)}")
    basis = ranked["rank_basis"].iloc[0]
    top = next(ranked.itertuples(index=False))
    runner = next(ranked.iloc[1:].itertuples(index=False), None)
    behind = (f"{_per_learnable(top, basis)}, {_est(top.per_env, top.per_env_lower, top.per_env_upper)} learnable "
              f"per environment slot (n={int(top.n_envs)} environments by {top.author})")
    rival = f"runner-up {runner.author} (p_best {runner.p_best:.2f})" if runner is not None else "the only ranked author"
    if runner is None or top.p_best >= decision.TARGET:
        head = f"pay {top.author}: p_best {top.p_best:.2f}, {rival}; {behind}"
    else:
        # the table keeps each author's rate, not its slots' P: each slot is taken at the author's rate
        groups = {r.author: np.full(max(int(r.n_envs), 1), float(r.per_env)) for r in ranked.itertuples(index=False)}
        costs = ({r.author: float(r.author_cost_usd) / max(int(r.n_slots), 1) for r in ranked.itertuples(index=False)}
                 if basis == "per_usd" else None)
        n = decision.size_for_decision(groups, costs=costs)
        todo = (f"about {n} environments per author would decide it ({max(n - int(top.n_envs), 0)} more for "
                f"{top.author}); {more_envs_command(n)}" if n is not None else
                "the leaders' rates are too close for any affordable size to separate them")
        head = (f"not decided yet: {top.author} leads with p_best {top.p_best:.2f} (a decision needs "
                f"{decision.TARGET:g}), {rival}; {behind}; {todo}")
    parts = [head]
    for r in ranked.iloc[1:].itertuples(index=False):
        rank = f"rank {int(r.rank)} [{int(r.rank_lower)}-{int(r.rank_upper)}], n={int(r.n_envs)}"
        parts.append(f"{r.author} {_fmt(r.per_env)}, {_fmt(r.per_usd) if r.priced else 'no price'}, "
                     f"{_fmt(r.per_kcall)} ({rank})")
    apart = table[table["status"] == UNPRICED].sort_values("author")
    others = table[~table["status"].isin([RANKED, UNPRICED])]
    skipped = [f"{r.author}: {r.status} (n={int(r.n_envs)})" for r in others.itertuples(index=False)]
    line = f"for {learner} (ranked {'per dollar' if basis == 'per_usd' else 'per call: no author has a price'}): "
    line += "; ".join(parts)
    if len(mix):
        total = mix[mix["author"] == "(total)"].iloc[0]
        picks = ", ".join(f"{m.author} {m.share:.0%}" for m in mix[mix["author"] != "(total)"].itertuples())
        unit = f"${total.budget:g}" if total.currency == "usd" else f"{total.budget:g} calls"
        line += (f". Best mix for {unit}: {picks} -> "
                 f"{_est(total.expected_learnable, total.expected_lower, total.expected_upper)} learnable environments")
    if len(apart):
        line += ". No price, listed apart (per 1000 calls): " + "; ".join(
            f"{r.author} {_est(r.per_kcall, r.per_kcall_lower, r.per_kcall_upper)}, "
            f"{_fmt(r.per_env)} per environment (n={int(r.n_envs)})" for r in apart.itertuples(index=False))
    if skipped:
        line += ". Not ranked: " + "; ".join(skipped)
    return line


def answer_markdown(line: str) -> str:
    """The answer line for a page that does not wrap one long line (the Dagster UI cut it at 1600 px, issue 43):
    one clause per line (a Markdown hard break at each top-level "; "), the words unchanged."""
    clauses, depth, start = [], 0, 0
    for i, ch in enumerate(line):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if depth == 0 and line.startswith("; ", i):
            clauses.append(line[start:i + 1])
            start = i + 2
    clauses.append(line[start:])
    return "  \n".join(clauses)
