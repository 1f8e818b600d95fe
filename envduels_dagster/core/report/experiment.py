"""The one-page experiment report: "which author should I pay for my learner?" first, then the evidence.

Why one static HTML file: a researcher opens it from the Dagster UI (the asset's ``report`` link), from
``envduels report`` or by hand, with no network, no script and no server: every figure is inline SVG
(``core/report/figures.py``, ``core/value/chart.py``), every number carries its interval and its sample size,
as Chatbot Arena's leaderboard does. The same warehouse rows give the same bytes (no timestamp is printed;
the report's Dagster run says when). What it shows, in order: the answer per learner (table ``author_value``'s
top-ranked row), the leaderboard, the hint-lift heatmap, solver rank against author rank, author value per
learner, the training sets with where their other candidates went, the hardening rounds, what was spent, and
links to the pairs' episodes (``core/play/transcripts.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

import pandas as pd

from envduels_dagster.core.report.figures import lift_heatmap_svg, rank_scatter_svg
from envduels_dagster.core.report.spend import read_costs, spend_html, spend_table
from envduels_dagster.core.stats.rounding import as_float
from envduels_dagster.core.value.author_value import RANKED, UNPRICED
from envduels_dagster.core.value.chart import value_svg

BASIS_WORDS = {"per_usd": "learnable environments per US dollar", "per_kcall": "learnable environments per 1000 calls"}


@dataclass
class ReportInputs:
    """What the report reads; every frame is one warehouse table's rows (empty when not materialized yet)."""

    round: int = 0
    rankings: pd.DataFrame = field(default_factory=pd.DataFrame)
    summary: pd.DataFrame = field(default_factory=pd.DataFrame)  # rankings_summary
    pair_lift: pd.DataFrame = field(default_factory=pd.DataFrame)  # of ``round``
    author_value: pd.DataFrame = field(default_factory=pd.DataFrame)
    author_value_mix: pd.DataFrame = field(default_factory=pd.DataFrame)
    training: dict[str, dict] = field(default_factory=dict)  # learner -> {"admitted", "categories", "excluded"}
    progress: pd.DataFrame = field(default_factory=pd.DataFrame)  # authoring_progress
    rounds: pd.DataFrame = field(default_factory=pd.DataFrame)  # per round: written, valid, hardened, kept
    costs: pd.DataFrame = field(default_factory=pd.DataFrame)  # per model: authoring and play calls/cost (spend.py)
    pilot_costs: pd.DataFrame = field(default_factory=pd.DataFrame)  # the same from the pilot's warehouse
    ledger: dict[str, dict[str, float]] | None = None  # the budget ledger's settled calls per model (None: no file)
    episode_pages: dict[str, str] = field(default_factory=dict)  # "author|solver" -> relative link


def read_inputs(conn, round_: int = 0) -> ReportInputs:
    """The warehouse tables the report shows (read only); the training summaries are added by the caller."""
    tables = {t for (t,) in conn.execute("SHOW TABLES").fetchall()}

    def q(sql: str, *needs: str, params=None) -> pd.DataFrame:
        return conn.execute(sql, params or []).df() if all(t in tables for t in needs) else pd.DataFrame()

    return ReportInputs(
        round=round_,
        rankings=q("SELECT * FROM rankings ORDER BY solver_rank NULLS LAST, model", "rankings"),
        summary=q("SELECT * FROM rankings_summary", "rankings_summary"),
        pair_lift=q("SELECT * FROM pair_lift WHERE round = ? ORDER BY author, solver", "pair_lift", params=[round_]),
        author_value=q("SELECT * FROM author_value ORDER BY learner, rank NULLS LAST, author", "author_value"),
        author_value_mix=q("SELECT * FROM author_value_mix ORDER BY learner", "author_value_mix"),
        progress=q("SELECT * FROM authoring_progress ORDER BY round, author", "authoring_progress"),
        rounds=q("""SELECT round, count(*) AS written, sum(valid::INT) AS valid,
                           sum((parent_env_id IS NOT NULL)::INT) AS from_a_parent,
                           sum((parent_env_id IS NOT NULL AND source_sha256 IN (SELECT source_sha256 FROM environments
                                p WHERE p.env_id = e.parent_env_id))::INT) AS kept_unchanged
                    FROM environments e GROUP BY round ORDER BY round""", "environments"),
        costs=read_costs(conn),
    )



def fmt(x, digits: int = 2) -> str:
    """A figure for display: 3 significant digits from 10 up, else ``digits`` decimals; "n/a" when missing."""
    v = as_float(x)
    if v is None:
        return "n/a"
    return f"{v:.{digits}f}" if abs(v) < 10 else f"{v:.1f}" if abs(v) < 100 else f"{v:.0f}"


def estimate(x, lo, hi) -> str:
    """An estimate and its 95% interval, rounded to what the interval justifies (``core.stats.rounding``); the
    estimate alone by ``fmt`` without an interval."""
    from envduels_dagster.core.stats.rounding import format_estimate, interval_decimals

    if interval_decimals(lo, hi) is None:
        return f"{fmt(x)} {interval(lo, hi)}".rstrip()
    return format_estimate(x, lo, hi)


def interval(lo, hi) -> str:
    return "" if as_float(lo) is None or as_float(hi) is None else f"[{fmt(lo)}, {fmt(hi)}]"


def rank_interval(lo, hi) -> str:
    return "" if as_float(lo) is None or as_float(hi) is None else f"[{float(lo):g}-{float(hi):g}]"


def answers(author_value: pd.DataFrame) -> pd.DataFrame:
    """Per learner, the author to pay: its top-ranked row of ``author_value`` (rank 1), with the figure it was
    ranked by; learners without a ranked author get a row saying why (author None)."""
    rows = []
    for learner, grp in author_value.groupby("learner", sort=True):
        top = grp[(grp["status"] == RANKED) & (grp["rank"] == 1)]
        if top.empty:
            rows.append({"learner": learner, "author": None, "basis": None, "value": None, "lower": None,
                         "upper": None, "rank_lower": None, "rank_upper": None, "p_best": None, "n_envs": None,
                         "per_env": None, "why": "insufficient data: no other author has enough environments"})
            continue
        r = top.iloc[0]
        basis = str(r["rank_basis"])
        rows.append({"learner": learner, "author": r["author"], "basis": basis, "value": r[basis],
                     "lower": r[f"{basis}_lower"], "upper": r[f"{basis}_upper"], "rank_lower": r["rank_lower"],
                     "rank_upper": r["rank_upper"], "p_best": r["p_best"], "n_envs": r["n_envs"],
                     "per_env": r["per_env"], "why": ""})
    return pd.DataFrame(rows)


def _table(columns: list[str], rows: list[list[str]], cls: str = "") -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _answer_section(inp: ReportInputs) -> str:
    ans = answers(inp.author_value) if len(inp.author_value) else pd.DataFrame()
    if ans.empty:
        return '<section id="answer"><h2>Which author should I pay for my learner?</h2><p>author_value has not ' \
               "been materialized yet.</p></section>"
    rows = []
    for a in ans.itertuples(index=False):
        if a.author is None:
            rows.append(f'<tr class="answer" data-learner="{escape(a.learner)}"><td>{escape(a.learner)}</td>'
                        f'<td colspan="5">{escape(a.why)}</td></tr>')
            continue
        rows.append(f'<tr class="answer" data-learner="{escape(a.learner)}" data-author="{escape(a.author)}">'
                    f"<td>{escape(a.learner)}</td><td><b>{_pair_link(inp, a.author, a.learner)}</b></td>"
                    f"<td>{estimate(a.value, a.lower, a.upper)} {escape(BASIS_WORDS[a.basis])}</td>"
                    f"<td>{fmt(a.per_env)}</td><td>1 {rank_interval(a.rank_lower, a.rank_upper)}, "
                    f"P(best) {fmt(a.p_best)}</td><td>{int(a.n_envs)}</td></tr>")
    head = "".join(f"<th>{h}</th>" for h in ("learner", "pay this author", "figure it is ranked by (95% interval)",
                                              "learnable per environment slot", "rank [95% interval]",
                                              "environments (n)"))
    return ('<section id="answer"><h2>Which author should I pay for my learner?</h2>'
            f'<table class="answers"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
            "<p class=\"note\">The author ranked first for each learner in table <code>author_value</code>: the most "
            "environments the learner fails cold and passes with the hint, per dollar of writing them (per call when "
            "no author has a price; authors without a price are listed apart below). Prices of simulated models are "
            "illustrative.</p></section>")


def _leaderboard(inp: ReportInputs) -> str:
    r = inp.rankings
    if r.empty:
        return "<section id=\"leaderboard\"><h2>Leaderboard</h2><p>rankings has not been materialized.</p></section>"
    rows = [[f"<b>{escape(str(m.model))}</b>", f"{fmt(m.solver_rank, 0)} {rank_interval(m.solver_rank_lower, m.solver_rank_upper)}",
             f"{estimate(m.solver_score, m.solver_score_ci_lower, m.solver_score_ci_upper)}",
             str(int(m.solver_n_envs)) if as_float(m.solver_n_envs) is not None else "",
             f"{fmt(m.author_rank, 0)} {rank_interval(m.author_rank_lower, m.author_rank_upper)}",
             f"{estimate(m.author_score, m.author_score_ci_lower, m.author_score_ci_upper)}",
             str(int(m.author_n_envs)) if as_float(m.author_n_envs) is not None else "",
             _duels(m)]
            for m in r.itertuples(index=False)]
    cols = ["model", "solver rank [95%]", "solver score (cold success) [95% t]", "solved envs (n)",
            "author rank [95%]", "author score (peer hint lift) [95% t]", "authored envs (n)", "duels W-T-L"]
    return (f'<section id="leaderboard"><h2>Leaderboard (round {inp.round})</h2>{_table(cols, rows, "leaderboard")}'
            "<p class=\"note\">Sorted by solver rank. Intervals: 95%; a blank interval is withheld below the sample "
            "size where it was calibrated (docs/STATISTICS.md).</p></section>")


def _duels(m) -> str:
    """W-T-L, or why there is none: a duel needs both models to author and solve (issue 43: 0-0-0 read as a
    record of draws in a roles experiment)."""
    counts = [int(as_float(x) or 0) for x in (m.duel_wins, m.duel_ties, m.duel_losses)]
    if sum(counts) == 0:
        return "no duels (needs both roles)" if as_float(m.solver_rank) is None or as_float(m.author_rank) is None \
            else "none"
    return "-".join(map(str, counts))


def _value_section(inp: ReportInputs) -> str:
    av = inp.author_value
    if av.empty:
        return ""
    parts = ['<section id="author-value"><h2>Author value per learner</h2>']
    for learner, grp in av.groupby("learner", sort=True):
        grp = grp.sort_values(["rank", "author"], na_position="last")
        parts.append(f'<div class="learner" data-learner="{escape(learner)}"><h3>learner {escape(learner)}</h3>'
                     f'<div class="chart">{value_svg(grp.reset_index(drop=True), learner)}</div>')
        rows = [[_pair_link(inp, str(r.author), learner), f"{fmt(r.rank, 0)} {rank_interval(r.rank_lower, r.rank_upper)}"
                 if as_float(r.rank) is not None else escape(str(r.status)),
                 f"{estimate(r.per_env, r.per_env_lower, r.per_env_upper)}",
                 f"{estimate(r.per_usd, r.per_usd_lower, r.per_usd_upper)}" if r.priced else "no price",
                 f"{estimate(r.per_kcall, r.per_kcall_lower, r.per_kcall_upper)}", fmt(r.validity_rate),
                 str(int(r.n_envs))] for r in grp[grp["status"] != UNPRICED].itertuples(index=False)]
        parts.append(_table(["author", "rank [95%]", "per environment slot", "per US dollar", "per 1000 calls",
                             "validity rate", "environments (n)"], rows, "value"))
        apart = grp[grp["status"] == UNPRICED]
        if len(apart):
            parts.append("<p><b>No price, listed apart</b> (never ranked per dollar, never shown as free): "
                         + "; ".join(f"{escape(str(r.author))} "
                                     f"{estimate(r.per_kcall, r.per_kcall_lower, r.per_kcall_upper)} per 1000 calls, n={int(r.n_envs)}"
                                     for r in apart.itertuples(index=False)) + "</p>")
        parts.append("</div>")
    return "".join(parts) + "</section>"


def _training_section(inp: ReportInputs) -> str:
    if not inp.training:
        return ""
    rows, details = [], []
    for learner, t in sorted(inp.training.items()):
        cats = t.get("categories", {})
        excluded = t.get("excluded", pd.DataFrame())
        missed = excluded[excluded["category"] == "learnable"] if len(excluded) else excluded
        links = ", ".join(_pair_link(inp, a, learner, a) for a, s in sorted(
            p.split("|", 1) for p in inp.episode_pages) if s == learner)
        rows.append([escape(learner), f"<b>{int(t['admitted'])}</b>", str(int(t.get("considered", 0))),
                     ", ".join(f"{escape(k)} {int(v)}" for k, v in sorted(cats.items())),
                     str(len(missed)), links or "none"])
        if len(excluded):
            reasons = excluded.groupby("reason").size().sort_values(ascending=False)
            details.append(f"<li><b>{escape(learner)}</b>: " + "; ".join(
                f"{int(n)} {escape(reason)}" for reason, n in reasons.items()) + "</li>")
    return ('<section id="training"><h2>Training sets</h2>'
            + _table(["learner", "admitted", "candidates", "categories (as observed)",
                      "learnable as observed, not admitted", "episodes, by author"], rows, "training")
            + "<p>Where the candidates not admitted went:</p><ul>" + "".join(details) + "</ul></section>")


def _rounds_section(inp: ReportInputs) -> str:
    if inp.rounds.empty:
        return ""
    rows = [[str(int(r.round)), str(int(r.written)), str(int(r.valid)), str(int(r.from_a_parent)),
             str(int(r.kept_unchanged))] for r in inp.rounds.itertuples(index=False)]
    out = ('<section id="rounds"><h2>Hardening rounds</h2>'
           + _table(["round", "environments written", "valid", "from a parent", "kept unchanged"], rows))
    if len(inp.progress):
        prog = [[escape(str(p.author)), str(int(p.round)), estimate(p.design_change, p.design_change_lower, p.design_change_upper),
                 f"{estimate(p.hint_change, p.hint_change_lower, p.hint_change_upper)}", str(int(p.n_pairs))]
                for p in inp.progress.itertuples(index=False)]
        out += _table(["author", "round", "design score change [95% t]", "hint score change [95% t]",
                       "lineage pairs (n)"], prog)
    return out + "</section>"


def _cost_section(inp: ReportInputs) -> str:
    return spend_html(spend_table(inp.costs, inp.pilot_costs), inp.ledger)


def _pair_link(inp: ReportInputs, author: str, solver: str, text: str | None = None) -> str:
    """``text`` (default: the author) linking to the pair's episode index, when the pair has a page."""
    href = inp.episode_pages.get(f"{author}|{solver}")
    label = escape(author if text is None else text)
    return f'<a class="episodes" href="{escape(href)}#index">{label}</a>' if href else label


def _ranks_section(inp: ReportInputs) -> str:
    """Solver rank against author rank, drawn only when at least two models hold both roles; else one line."""
    if inp.rankings.empty:
        return ""
    r = inp.rankings
    both = r.dropna(subset=["solver_rank", "author_rank"]) if {"solver_rank", "author_rank"} <= set(r) else r[:0]
    if len(both) < 2:
        return ('<section id="ranks"><h2>Solver rank against author rank</h2><p class="needs-roles">Not drawn: it '
                f"needs at least two models that both author and solve; this experiment has {len(both)} "
                "(models with one role are ranked in that role only).</p></section>")
    rho = ""
    if len(inp.summary):
        s = inp.summary.iloc[0]
        rho = (f"<p>Spearman ρ (solver rank vs author rank) = "
               f"{estimate(s.get('role_rho'), s.get('role_rho_lower'), s.get('role_rho_upper'))}, permutation p = "
               f"{fmt(s.get('role_p_value'), 3)}, {int(s.get('role_n_models') or 0)} models.</p>")
    return f'<section id="ranks"><h2>Solver rank against author rank</h2>{rank_scatter_svg(r)}{rho}</section>'


def _episodes_section(inp: ReportInputs) -> str:
    if not inp.episode_pages:
        return ""
    links = "".join(f'<li><a class="episodes" href="{escape(href)}">{escape(pair.replace("|", " → "))}</a></li>'
                    for pair, href in sorted(inp.episode_pages.items()))
    return ('<section id="episodes"><h2>Episodes (author → solver)</h2><p>Cold and hinted play of each seed side '
            f'by side, turn by turn (also <code>envduels show ENV_ID</code>).</p><ul class="pairs">{links}</ul>'
            "</section>")


STYLE = ("body{font-family:sans-serif;margin:24px;max-width:1400px;color:#222} table{border-collapse:collapse;"
         "margin:8px 0} th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;font-size:13px} th{background:"
         "#f0f3f7} .note{color:#555;font-size:13px} section{margin-bottom:28px} .answers td{font-size:15px} "
         "ul.pairs{columns:4}")


def render(inp: ReportInputs) -> str:
    """The report as one self-contained HTML page (no script, no external resource)."""
    lift = inp.pair_lift
    links = {pair: f"{href}#index" for pair, href in inp.episode_pages.items()}
    heat = (f'<section id="lift"><h2>Hint lift, author × solver (round {inp.round})</h2>'
            f"{lift_heatmap_svg(lift, links)}<p class=\"note\">Each cell opens the pair's episodes.</p>"
            "</section>") if len(lift) else ""
    scatter = _ranks_section(inp)
    sections = [_answer_section(inp), _leaderboard(inp), heat, scatter, _value_section(inp), _training_section(inp),
                _rounds_section(inp), _cost_section(inp), _episodes_section(inp)]
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>EnvDuels experiment report</title>'
            f"<style>{STYLE}</style></head><body><h1>EnvDuels experiment report</h1>{''.join(sections)}</body></html>")
