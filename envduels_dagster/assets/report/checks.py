"""The check on ``experiment_report``: the page is self-contained and shows the numbers of the tables it reads.

Why: the report was the one table-producing asset without a check (issue 43). A page that fetched a script or
a font, linked to a missing episode page, or named another author than ``author_value`` ranks first, or whose
spend total is not the warehouse's, would still have "materialized". The rules are pure functions of the page
and the warehouse (``report_problems``) so a test can feed them a broken page.
"""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.report.assets import experiment_report, report_dir

EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']\s*(?:https?:)?//""", re.I)


def report_problems(html: str, folder: Path, top: dict[str, str], spend_total: float | None) -> list[str]:
    """What is wrong with the page ``html`` (in ``folder``): empty when nothing. ``top``: learner -> the
    author ranked first in ``author_value``; ``spend_total``: the warehouse's total in dollars (None: no table)."""
    problems = []
    if re.search(r"<script\b", html, re.I):
        problems.append("the page holds a <script> (it must open with scripts off)")
    if EXTERNAL.search(html):
        problems.append(f"the page loads or links an external resource: {EXTERNAL.search(html).group(0)}...")
    for href in sorted(set(re.findall(r'href="(episodes/[^"#]+)', html))):
        if not (folder / href).is_file():
            problems.append(f"episode page {href} is linked but missing")
    shown = dict(re.findall(r'<tr class="answer" data-learner="([^"]*)" data-author="([^"]*)"', html))
    if shown != top:
        problems.append(f"answer rows {shown} differ from author_value's rank 1 {top}")
    total = re.search(r'class="grand-total" data-usd="([0-9.]+)"', html)
    if spend_total is not None and (total is None or abs(float(total.group(1)) - spend_total) > 1e-6):
        problems.append(f"spend total {total.group(1) if total else 'missing'} differs from the warehouse's "
                        f"{spend_total:.6f}")
    return problems


@dg.asset_check(asset=experiment_report, name="report_self_contained_and_matches_tables",
                description="The report opens offline (no script, nothing fetched), every episode link has its "
                            "page, the answer per learner is author_value's rank 1, and the spend total is the "
                            "warehouse's.")
def report_self_contained_and_matches_tables(warehouse: DuckDBResource) -> dg.AssetCheckResult:
    from envduels_dagster.core.report.spend import read_costs, read_pilot_costs, spend_table
    from envduels_dagster.settings.locations import envduels_home

    folder = report_dir()
    path = folder / "index.html"
    if not path.is_file():
        return dg.AssetCheckResult(passed=False, metadata={"problems": f"no report at {path}"})
    html = path.read_text()
    with warehouse.get_connection() as conn:
        tables = {t for (t,) in conn.execute("SHOW TABLES").fetchall()}
        top = dict(conn.execute("SELECT learner, author FROM author_value WHERE rank = 1 AND status = 'ranked'")
                   .fetchall()) if "author_value" in tables else {}
        costs = read_costs(conn)
    table = spend_table(costs, read_pilot_costs(envduels_home() / "plans" / "pilot.duckdb"))
    total = float(table["total_usd"].fillna(0).sum()) if len(table) else None
    problems = report_problems(html, folder, top, total)
    return dg.AssetCheckResult(passed=not problems, metadata={
        "problems": dg.MetadataValue.text("; ".join(problems) or "none"),
        "learners": len(top), "spend_total_usd": round(total, 4) if total is not None else None})
