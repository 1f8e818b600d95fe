"""The report's "What was spent": every model's calls and dollars, by role, with cache hits and the pilot apart,
and its total set against the budget ledger.

Why every model and not the authors: in a roles experiment (authors on one side, learners on the other) the
table listed the authors only and left out the learner's play (issue 43: a quarter of the money). Rows are the
union of authors (``environments``), solvers (``episodes``) and the pilot's own warehouse
(``plans/pilot.duckdb``, ``envduels plan --pilot``); the ledger (``core/models/budget.py``) is what was paid.
"""

from __future__ import annotations

import sqlite3
from html import escape
from pathlib import Path

import pandas as pd

from envduels_dagster.core.stats.rounding import as_float

COST_SQL = """
WITH a AS (SELECT author AS model, sum(author_calls) AS calls, sum(author_cost_usd) AS cost FROM environments
           GROUP BY author),
     p AS (SELECT solver AS model, sum(model_calls - cached_calls) AS calls, sum(cached_calls) AS cached,
                  sum(cost_usd) AS cost FROM episodes GROUP BY solver)
SELECT coalesce(a.model, p.model) AS model, coalesce(a.calls, 0) AS authoring_calls, a.cost AS authoring_cost_usd,
       coalesce(p.calls, 0) AS play_calls, coalesce(p.cached, 0) AS play_cached_calls, p.cost AS play_cost_usd
FROM a FULL OUTER JOIN p ON a.model = p.model ORDER BY 1"""

COLUMNS = ["authoring_calls", "authoring_cost_usd", "play_calls", "play_cached_calls", "play_cost_usd"]


def read_costs(conn) -> pd.DataFrame:
    """Per model: authoring calls and list-price dollars, play calls paid, play cache hits, play dollars."""
    tables = {t for (t,) in conn.execute("SHOW TABLES").fetchall()}
    if not {"environments", "episodes"} <= tables:
        return pd.DataFrame(columns=["model", *COLUMNS])
    return conn.execute(COST_SQL).df()


def read_pilot_costs(path: Path) -> pd.DataFrame:
    """The same figures from the pilot's own warehouse, when a pilot ran (empty otherwise)."""
    if not path.is_file():
        return pd.DataFrame(columns=["model", *COLUMNS])
    import duckdb

    with duckdb.connect(str(path), read_only=True) as conn:
        return read_costs(conn)


def read_ledger(path: Path) -> dict[str, dict[str, float]] | None:
    """Per model, what the budget ledger settled (calls, usd); None when there is no ledger file (no cap was
    set, so nothing was recorded). Opened read-only: the report never creates or changes it."""
    if not path.is_file():
        return None
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT model, COUNT(*), SUM(usd) FROM spend WHERE state = 'spent' "
                            "GROUP BY model ORDER BY model").fetchall()
    return {m: {"calls": int(n), "usd": float(u or 0.0)} for m, n, u in rows}



def usd(x) -> str:
    v = as_float(x)
    return "no price" if v is None else f"${v:.4f}" if abs(v) < 1 else f"${v:,.2f}"


def spend_table(costs: pd.DataFrame, pilot: pd.DataFrame) -> pd.DataFrame:
    """One row per model: the run's authoring and play, the pilot's calls and dollars, and the total paid."""
    run = costs.set_index("model") if len(costs) else pd.DataFrame(columns=COLUMNS)
    pil = pilot.set_index("model") if len(pilot) else pd.DataFrame(columns=COLUMNS)
    rows = []
    for model in sorted(set(run.index) | set(pil.index)):
        r = run.loc[model] if model in run.index else None
        p = pil.loc[model] if model in pil.index else None

        def get(src, col):
            return None if src is None else as_float(src[col])

        dollars = [get(r, "authoring_cost_usd"), get(r, "play_cost_usd"), get(p, "authoring_cost_usd"),
                   get(p, "play_cost_usd")]
        rows.append({"model": model, "authoring_calls": int(get(r, "authoring_calls") or 0),
                     "authoring_usd": dollars[0], "play_calls": int(get(r, "play_calls") or 0), "play_usd": dollars[1],
                     "cache_hits": int(get(r, "play_cached_calls") or 0),
                     "pilot_calls": int((get(p, "authoring_calls") or 0) + (get(p, "play_calls") or 0)),
                     "pilot_usd": None if dollars[2] is None and dollars[3] is None else (dollars[2] or 0) + (dollars[3] or 0),
                     "total_usd": None if all(d is None for d in dollars) else sum(d or 0.0 for d in dollars)})
    return pd.DataFrame(rows)


def spend_html(table: pd.DataFrame, ledger: dict[str, dict[str, float]] | None) -> str:
    """The section: the table with a total row and, with a ledger, what it paid per model beside the warehouse's
    figures, its total as the page's total, and whatever the warehouse's tables do not account for named apart."""
    if table.empty and not ledger:
        return ""
    head = ["model", "authoring calls", "authoring (list price)", "play calls paid", "play", "play cache hits ($0)",
            "pilot calls", "pilot", "total (warehouse)"] + (["paid (budget ledger)"] if ledger is not None else [])
    known = set(table["model"]) if len(table) else set()
    extra = [{"model": m, "authoring_calls": 0, "authoring_usd": None, "play_calls": 0, "play_usd": None,
              "cache_hits": 0, "pilot_calls": 0, "pilot_usd": None, "total_usd": None}
             for m in sorted(set(ledger or {}) - known)]  # paid only outside the tables (a study, a failed run)
    table = pd.concat([table, pd.DataFrame(extra)], ignore_index=True) if extra else table
    body, beyond = [], []
    for r in table.itertuples(index=False):
        paid_cell = ""
        if ledger is not None:
            paid = ledger.get(r.model, {}).get("usd", 0.0)
            paid_cell = f'<td class="paid" data-usd="{paid:.6f}">{usd(paid)}</td>'
            if paid - (as_float(r.total_usd) or 0.0) > 5e-7:
                beyond.append(f"{escape(r.model)} {usd(paid - (as_float(r.total_usd) or 0.0))}")
        body.append(f'<tr data-model="{escape(r.model)}"><td>{escape(r.model)}</td><td>{r.authoring_calls}</td>'
                    f"<td>{usd(r.authoring_usd)}</td><td>{r.play_calls}</td><td>{usd(r.play_usd)}</td>"
                    f"<td>{r.cache_hits}</td><td>{r.pilot_calls}</td><td>{usd(r.pilot_usd) if r.pilot_calls else '—'}"
                    f'</td><td class="total" data-usd="{as_float(r.total_usd) or 0:.6f}">{usd(r.total_usd)}</td>'
                    f"{paid_cell}</tr>")
    total = float(sum(as_float(v) or 0.0 for v in table["total_usd"]))
    sums = [int(table[c].sum()) for c in ("authoring_calls", "play_calls", "cache_hits", "pilot_calls")]
    paid_total = sum(v["usd"] for v in ledger.values()) if ledger is not None else None
    body.append(f'<tr class="sum"><td><b>all models</b></td><td>{sums[0]}</td><td></td><td>{sums[1]}</td><td></td>'
                f'<td>{sums[2]}</td><td>{sums[3]}</td><td></td><td class="grand-total" data-usd="{total:.6f}">'
                f"<b>{usd(total)}</b></td>" + (f'<td class="ledger-total" data-usd="{paid_total:.6f}"><b>'
                                               f"{usd(paid_total)}</b></td>" if ledger is not None else "") + "</tr>")
    if ledger is None:
        verdict = ("No budget ledger: no cap was set (ENVDUELS_BUDGET_USD or a model's budget_usd), so calls were "
                   "not recorded there; the figures above are the warehouse's.")
    else:
        calls = sum(v["calls"] for v in ledger.values())
        agree = ("equal to the warehouse's total" if abs(paid_total - total) < 5e-7 + 1e-6 * paid_total
                 else f"{usd(abs(paid_total - total))} {'more' if paid_total > total else 'less'} than the warehouse's")
        verdict = (f"The budget ledger paid {usd(paid_total)} for {calls} calls: {agree}."
                   + (f" Paid beyond the warehouse's authoring and play: {'; '.join(beyond)} (calls of the "
                      "lift_learning study, which records no cost, or of runs whose rows were replaced)."
                      if beyond else "")
                   + " Authoring served from the call cache is counted at list price in the warehouse and not "
                     "paid in the ledger.")
    thead = "".join(f"<th>{escape(h)}</th>" for h in head)
    return ('<section id="cost"><h2>What was spent</h2><table class="spend"><thead><tr>' + thead + "</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table><p class=\"note\">{verdict} Play and pilot are what was paid "
            "(a cache hit costs nothing); prices of simulated models are illustrative.</p></section>")
