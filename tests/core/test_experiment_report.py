"""The experiment report and its figures on hand-built tables: the answer is author_value's top row, one heatmap
cell per pair with its n, one point per ranked model, nothing fetched from the network."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from envduels_dagster.core.report.experiment import ReportInputs, answers, render
from envduels_dagster.core.report.figures import lift_colour, lift_heatmap_svg, rank_scatter_svg
from envduels_dagster.core.stats.rounding import format_estimate
from envduels_dagster.core.value.author_value import author_value
from tests.core.test_author_value import LEARNER, warehouse

MODELS = ["a", "b", "c"]


def pair_lift() -> pd.DataFrame:
    rows = []
    for i, author in enumerate(MODELS):
        for j, solver in enumerate(MODELS):
            lo = None if author == "c" else -0.1 + 0.1 * i
            rows.append({"round": 0, "author": author, "solver": solver, "is_self_pair": author == solver,
                         "n_envs": 3 + i, "lift": 0.1 * i - 0.05 * j, "lift_ci_lower": lo,
                         "lift_ci_upper": None if lo is None else lo + 0.3})
    return pd.DataFrame(rows)


def rankings() -> pd.DataFrame:
    return pd.DataFrame({
        "model": MODELS + ["import:x"], "solver_rank": [1.0, 2.0, 3.0, None], "solver_rank_lower": [1.0, 1.0, 2.0, None],
        "solver_rank_upper": [2.0, 3.0, 3.0, None], "author_rank": [3.0, 1.0, 2.0, 4.0],
        "author_rank_lower": [2.0, 1.0, 1.0, 3.0], "author_rank_upper": [3.0, 2.0, 3.0, 4.0],
        "solver_score": [0.9, 0.5, 0.123456789, None], "solver_score_ci_lower": [0.8, 0.4, 0.1, None],
        "solver_score_ci_upper": [1.0, 0.6, 0.2, None], "solver_n_envs": [6, 6, 6, 0],
        "author_score": [0.1, 0.3, 0.2, 0.0], "author_score_ci_lower": [None] * 4, "author_score_ci_upper": [None] * 4,
        "author_n_envs": [3, 3, 3, 2], "duel_wins": [2, 1, 0, 0], "duel_ties": [0] * 4, "duel_losses": [0, 1, 2, 0]})


def test_the_heatmap_has_one_cell_per_pair_with_its_interval_and_n_and_marks_self_pairs():
    svg = lift_heatmap_svg(pair_lift())
    cells = re.findall(r'<g class="cell( self)?" data-author="(\w+)" data-solver="(\w+)" data-lift="([^"]+)" '
                       r'data-n="(\d+)"', svg)
    assert len(cells) == 9
    assert sum(1 for c in cells if c[0]) == 3 and all((c[1] == c[2]) == bool(c[0]) for c in cells)
    assert {(a, s): int(n) for _, a, s, _, n in cells}[("b", "a")] == 4
    assert "[+0.00, +0.30]" in svg and "[no interval]" in svg  # author c has no interval: said, not hidden
    assert lift_colour(None) == "#eeeeee" and lift_colour(1.0) == "#3572b0" and lift_colour(-1.0) == "#c0392b"


def test_the_rank_figure_has_one_point_per_model_with_both_ranks():
    svg = rank_scatter_svg(rankings())
    points = re.findall(r'<g class="point" data-model="([^"]+)"', svg)
    assert points == ["a", "b", "c"]  # the import authors only: no solver rank, no point
    assert "solver rank 3 [2-3], author rank 2 [1-3]" in svg


def test_the_reports_answer_is_the_author_value_tables_top_row_per_learner():
    envs, eps = warehouse()
    table, mix = author_value(envs, eps, LEARNER, budget_usd=10.0, n_boot=300)
    ans = answers(table)
    top = table[table["rank"] == 1].iloc[0]
    assert ans.iloc[0]["learner"] == LEARNER and ans.iloc[0]["author"] == top["author"] == "cheap"
    assert ans.iloc[0]["value"] == pytest.approx(top["per_usd"]) and ans.iloc[0]["basis"] == "per_usd"
    html = render(ReportInputs(pair_lift=pair_lift(), rankings=rankings(), author_value=table, author_value_mix=mix))
    row = re.search(rf'<tr class="answer" data-learner="{LEARNER}" data-author="(\w+)">(.*?)</tr>', html).group(2)
    # rounded to what its interval justifies (core.stats.rounding)
    shown = format_estimate(top["per_usd"], top["per_usd_lower"], top["per_usd_upper"])
    assert f"<b>{top['author']}</b>" in row and f"{shown} learnable environments per US dollar" in row
    # the answer comes first, then the figures; nothing is fetched
    assert html.index('id="answer"') < html.index('id="leaderboard"') < html.index('id="lift-heatmap"')
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "0.12 [0.10, 0.20]" in html  # rounded for display (0.123456789 in the table)


def test_a_learner_without_a_ranked_author_says_insufficient_data():
    envs, eps = warehouse()
    table, _ = author_value(envs, eps, LEARNER, min_envs=50, n_boot=100)
    ans = answers(table)
    assert ans.iloc[0]["author"] is None and "insufficient data" in ans.iloc[0]["why"]
    assert "insufficient data" in render(ReportInputs(author_value=table))


def test_an_empty_warehouse_gives_a_page_that_says_what_is_missing():
    html = render(ReportInputs())
    assert "author_value has not been materialized yet" in html and "rankings has not been materialized" in html
