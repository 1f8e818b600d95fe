"""The experiment report's figures as plain SVG: the hint-lift heatmap and solver rank against author rank.

Why SVG written by hand (docs/DECISIONS.md, "The experiment report"): the report must open offline, with no
script and no font or library to fetch, and the same rows must give the same bytes (a figure is reproducible
from the warehouse and diffable in a test). matplotlib is not among the dependencies and would add tens of MB
for two charts; Vega-Lite and Plotly need a JavaScript runtime in the page. ``core/value/chart.py`` draws the
author-value bars the same way. Every mark carries a class and ``data-`` attributes, so a browser test can
count cells and points, and a ``<title>`` a reader sees on hover.
"""

from __future__ import annotations

from html import escape

import pandas as pd

from envduels_dagster.core.stats.rounding import as_float


def _signed(x) -> str:
    v = as_float(x)
    return "n/a" if v is None else f"{v:+.2f}"


def short(name: str, chars: int) -> str:
    """``name`` cut to ``chars`` characters with an ellipsis (the full name is the label's hover title): long
    model names ran into the next column's label."""
    return name if len(name) <= chars else name[:chars - 1] + "\u2026"


def lift_colour(lift: float | None) -> str:
    """Diverging scale on [-1, 1]: blue for a positive lift (the hint helps), red for a negative one."""
    if lift is None:
        return "#eeeeee"
    t = max(-1.0, min(1.0, lift))
    base = (53, 114, 176) if t >= 0 else (192, 57, 43)
    r, g, b = (round(255 + (c - 255) * abs(t)) for c in base)
    return f"#{r:02x}{g:02x}{b:02x}"


def lift_heatmap_svg(pair: pd.DataFrame, links: dict[str, str] | None = None) -> str:
    """Author (rows) x solver (columns) hint lift of one round: colour = lift, text = lift, its 95% interval and
    the number of environments; self pairs dashed and marked (they are not peer results).

    ``pair``: rows of ``pair_lift`` for one round (author, solver, lift, lift_ci_lower/upper, n_envs,
    is_self_pair). ``links``: "author|solver" -> the pair's episode index; a cell with one is a link to it."""
    authors = sorted(pair["author"].unique())
    solvers = sorted(pair["solver"].unique())
    cell_w, cell_h, left, top = 122, 58, 120, 62
    width = max(left + cell_w * max(len(solvers), 1) + 16, 560)
    height = top + cell_h * max(len(authors), 1) + 50
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" id="lift-heatmap" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="18" font-weight="bold">solver (plays cold and hinted)</text>',
           f'<text x="8" y="{top - 8}" font-weight="bold">author</text>']
    for j, s in enumerate(solvers):
        out.append(f'<text class="label" x="{left + j * cell_w + cell_w / 2}" y="{top - 10}" text-anchor="middle">'
                   f'{escape(short(s, 17))}<title>{escape(s)}</title></text>')
    cells = {(r.author, r.solver): r for r in pair.itertuples(index=False)}
    for i, a in enumerate(authors):
        y = top + i * cell_h
        out.append(f'<text class="label" x="8" y="{y + cell_h / 2 + 4}">{escape(short(a, 15))}<title>{escape(a)}'
                   "</title></text>")
        for j, s in enumerate(solvers):
            r = cells.get((a, s))
            if r is None:
                continue
            x = left + j * cell_w
            lift, lo, hi = as_float(r.lift), as_float(r.lift_ci_lower), as_float(r.lift_ci_upper)
            is_self = bool(r.is_self_pair)
            interval = f"[{lo:+.2f}, {hi:+.2f}]" if lo is not None and hi is not None else "[no interval]"
            n = int(r.n_envs) if as_float(r.n_envs) is not None else 0
            title = (f"{a} -> {s}: lift {_signed(lift)} {interval}, n={n} environments"
                     + (" (self pair: not a peer result)" if is_self else ""))
            dash = ' stroke-dasharray="4 3" stroke="#333" stroke-width="1.5"' if is_self else ' stroke="white"'
            href = (links or {}).get(f"{a}|{s}")
            if href:
                out.append(f'<a class="cell-link" href="{escape(href)}">')
            out.append(f'<g class="cell{" self" if is_self else ""}" data-author="{escape(a)}" '
                       f'data-solver="{escape(s)}" data-lift="{_signed(lift)}" data-n="{n}"><title>{escape(title)}'
                       f'</title><rect x="{x + 1}" y="{y + 1}" width="{cell_w - 2}" height="{cell_h - 2}" '
                       f'fill="{lift_colour(lift)}"{dash}/>'
                       f'<text x="{x + cell_w / 2}" y="{y + 18}" text-anchor="middle" font-weight="bold">'
                       f'{_signed(lift)}{" (self)" if is_self else ""}</text>'
                       f'<text x="{x + cell_w / 2}" y="{y + 33}" text-anchor="middle" font-size="11">{interval}</text>'
                       f'<text x="{x + cell_w / 2}" y="{y + 48}" text-anchor="middle" font-size="11" fill="#333">'
                       f'n={n}</text></g>' + ("</a>" if href else ""))
    out.append(f'<text x="8" y="{height - 24}" fill="#555">Hint lift = hinted minus cold success; 95% Student-t '
               'interval over environments; n = environments.</text>')
    out.append(f'<text x="8" y="{height - 8}" fill="#555">Blue: the hint helps, red: it hurts; dashed: self pair '
               '(excluded from peer figures).</text>')
    out.append("</svg>")
    return "\n".join(out)


def rank_scatter_svg(rankings: pd.DataFrame) -> str:
    """Solver rank (x) against author rank (y), one point per model with both ranks, 95% rank intervals as
    whiskers; the diagonal is "as good an author as a solver". ``rankings``: the ``rankings`` table."""
    rows = rankings.dropna(subset=["solver_rank", "author_rank"]).sort_values("model").reset_index(drop=True)
    n = max(int(max([as_float(v) or 1 for v in [*rows.get("solver_rank_upper", []), *rows.get("author_rank_upper", []),
                                              *rows["solver_rank"], *rows["author_rank"]]] or [1])), 1)
    size, left, top = 380, 70, 40
    width, height = left + size + 150, top + size + 70
    step = size / n

    def pos(rank: float) -> float:  # rank 1 at the origin side: x grows right, y grows down the page
        return (rank - 0.5) * step

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" id="rank-scatter" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<rect x="{left}" y="{top}" width="{size}" height="{size}" fill="none" stroke="#888"/>',
           f'<line x1="{left}" y1="{top}" x2="{left + size}" y2="{top + size}" stroke="#bbb" stroke-dasharray="5 4"/>',
           f'<text x="{left + size / 2}" y="{top + size + 40}" text-anchor="middle" font-weight="bold">'
           'solver rank (1 = best solver)</text>',
           f'<text x="18" y="{top + size / 2}" text-anchor="middle" font-weight="bold" '
           f'transform="rotate(-90 18 {top + size / 2})">author rank (1 = best hint lift)</text>']
    for k in range(1, n + 1):
        out.append(f'<text x="{left + pos(k)}" y="{top + size + 18}" text-anchor="middle">{k}</text>')
        out.append(f'<text x="{left - 10}" y="{top + pos(k) + 4}" text-anchor="end">{k}</text>')
    seen: dict[tuple[float, float], int] = {}
    for r in rows.itertuples(index=False):
        sx, ay = left + pos(float(r.solver_rank)), top + pos(float(r.author_rank))
        s_lo, s_hi = as_float(getattr(r, "solver_rank_lower", None)), as_float(getattr(r, "solver_rank_upper", None))
        a_lo, a_hi = as_float(getattr(r, "author_rank_lower", None)), as_float(getattr(r, "author_rank_upper", None))
        if s_lo is not None and s_hi is not None:
            out.append(f'<line x1="{left + pos(s_lo):.1f}" y1="{ay:.1f}" x2="{left + pos(s_hi):.1f}" y2="{ay:.1f}" '
                       'stroke="#3572b0" stroke-width="2"/>')
        if a_lo is not None and a_hi is not None:
            out.append(f'<line x1="{sx:.1f}" y1="{top + pos(a_lo):.1f}" x2="{sx:.1f}" y2="{top + pos(a_hi):.1f}" '
                       'stroke="#c0392b" stroke-width="2"/>')
        ranks = (f"solver rank {float(r.solver_rank):g} [{_fmt_rank(s_lo)}-{_fmt_rank(s_hi)}], author rank "
                 f"{float(r.author_rank):g} [{_fmt_rank(a_lo)}-{_fmt_rank(a_hi)}]")
        k = seen.get((sx, ay), 0)  # models at the same ranks: labels stacked, not printed over each other
        seen[(sx, ay)] = k + 1
        out.append(f'<g class="point" data-model="{escape(str(r.model))}"><title>{escape(str(r.model))}: {ranks}'
                   f'</title><circle cx="{sx:.1f}" cy="{ay:.1f}" r="6" fill="#222"/>'
                   f'<text class="label" x="{sx + 9:.1f}" y="{ay - 7 + 14 * k:.1f}">{escape(str(r.model))}</text></g>')
    out.append(f'<text x="{left}" y="{height - 8}" fill="#555">Whiskers: 95% rank intervals (blue: solver, red: '
               'author); dashed: equal ranks.</text>')
    out.append("</svg>")
    return "\n".join(out)


def _fmt_rank(x: float | None) -> str:
    return "?" if x is None else f"{x:g}"
