"""The experiment report and its figures on hand-built tables: the answer is author_value's top row, one heatmap
cell per pair with its n, one point per ranked model, nothing fetched from the network."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from envduels_dagster.core.report.experiment import ReportInputs, answers, render
from envduels_dagster.core.report.figures import lift_colour, lift_heatmap_svg, rank_scatter_svg
from envduels_dagster.core.stats.rounding import format_estimate
from envduels_dagster.core.value.author_value import ValueConfig, author_value
from tests.helpers.value_warehouse import LEARNER, warehouse

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
    table, mix = author_value(envs, eps, LEARNER, ValueConfig(projection_budget_usd=10.0, n_boot=300))
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
    table, _ = author_value(envs, eps, LEARNER, ValueConfig(min_envs=50, n_boot=100))
    ans = answers(table)
    assert ans.iloc[0]["author"] is None and "insufficient data" in ans.iloc[0]["why"]
    assert "insufficient data" in render(ReportInputs(author_value=table))


def test_an_empty_warehouse_gives_a_page_that_says_what_is_missing():
    html = render(ReportInputs())
    assert "author_value has not been materialized yet" in html and "rankings has not been materialized" in html


def roles_rankings() -> pd.DataFrame:
    """3 author-only models and 1 learner: one solver rank, three author ranks, no model with both."""
    r = rankings().iloc[:0]
    rows = [{"model": m, "solver_rank": None, "author_rank": float(k), "duel_wins": 0, "duel_ties": 0, "duel_losses": 0,
             "author_n_envs": 3, "solver_n_envs": None} for k, m in enumerate(["a", "b", "c"], 1)]
    rows.append({"model": "learner", "solver_rank": 1.0, "author_rank": None, "duel_wins": 0, "duel_ties": 0,
                 "duel_losses": 0, "author_n_envs": None, "solver_n_envs": 9})
    return pd.concat([r, pd.DataFrame(rows)], ignore_index=True)


def test_a_roles_experiment_says_in_one_line_what_it_cannot_draw_and_no_duel_reads_0_0_0():
    html = render(ReportInputs(rankings=roles_rankings()))
    assert 'id="rank-scatter"' not in html
    assert re.search(r'<p class="needs-roles">Not drawn: it needs at least two models that both author and solve; '
                     r"this experiment has 0", html)
    assert "0-0-0" not in html and html.count("no duels (needs both roles)") == 4
    full = render(ReportInputs(rankings=rankings()))  # the full tournament still draws it
    assert 'id="rank-scatter"' in full and "needs-roles" not in full


def _costs() -> tuple[pd.DataFrame, pd.DataFrame]:
    costs = pd.DataFrame([  # the authors wrote, the learner only played (what the old table left out)
        {"model": "a", "authoring_calls": 10, "authoring_cost_usd": 0.5, "play_calls": 0, "play_cached_calls": 0,
         "play_cost_usd": None},
        {"model": "learner", "authoring_calls": 0, "authoring_cost_usd": None, "play_calls": 221,
         "play_cached_calls": 30, "play_cost_usd": 0.046}])
    pilot = pd.DataFrame([{"model": "learner", "authoring_calls": 0, "authoring_cost_usd": None, "play_calls": 12,
                           "play_cached_calls": 0, "play_cost_usd": 0.004}])
    return costs, pilot


def test_the_spend_table_lists_every_model_with_play_pilot_and_cache_hits_apart_and_meets_the_ledger():
    from envduels_dagster.core.report.spend import spend_html, spend_table

    costs, pilot = _costs()
    table = spend_table(costs, pilot)
    learner = table.set_index("model").loc["learner"]
    assert list(table["model"]) == ["a", "learner"]
    assert (learner["play_calls"], learner["cache_hits"], learner["pilot_calls"]) == (221, 30, 12)
    assert learner["total_usd"] == pytest.approx(0.05) and table["total_usd"].sum() == pytest.approx(0.55)
    html = spend_html(table, {"a": {"calls": 10, "usd": 0.5}, "learner": {"calls": 233, "usd": 0.05}})
    assert 'class="grand-total" data-usd="0.550000"' in html and 'class="ledger-total" data-usd="0.550000"' in html
    assert "equal to the warehouse's total" in html and "Paid beyond" not in html
    short = spend_html(table, {"a": {"calls": 10, "usd": 0.5}})  # the ledger paid less: the page says by how much
    assert "$0.0500 less than the warehouse's" in short
    study = spend_html(table, {"a": {"calls": 10, "usd": 0.5}, "learner": {"calls": 300, "usd": 0.09},
                               "other": {"calls": 1, "usd": 0.01}})  # paid outside the tables: named, per model
    assert 'class="ledger-total" data-usd="0.600000"' in study and "$0.0500 more than the warehouse's" in study
    assert "Paid beyond the warehouse's authoring and play: learner $0.0400; other $0.0100" in study
    assert '<tr data-model="other">' in study
    assert "No budget ledger" in spend_html(table, None) and "ledger-total" not in spend_html(table, None)


def test_the_ledger_is_read_without_being_created_or_changed(tmp_path):
    from envduels_dagster.core.models.budget import BudgetLedger, Caps
    from envduels_dagster.core.models.registry import ModelEntry
    from envduels_dagster.core.report.spend import read_ledger

    path = tmp_path / "budget.sqlite"
    assert read_ledger(path) is None and not path.exists()
    ledger = BudgetLedger(path, Caps(total=5.0))
    entry = ModelEntry(name="m", model="openai/x", input_cost_per_mtok=1, output_cost_per_mtok=1)
    ledger.settle(ledger.reserve(entry, [{"role": "user", "content": "hi"}]), 0.25, 10, 10)
    ledger.reserve(entry, [{"role": "user", "content": "held, not paid"}])
    ledger.close()
    before = path.read_bytes()
    assert read_ledger(path) == {"m": {"calls": 1, "usd": 0.25}}
    assert path.read_bytes() == before


def test_heatmap_cells_the_answers_author_and_training_rows_link_to_the_pairs_episode_index():
    envs, eps = warehouse()
    table, mix = author_value(envs, eps, LEARNER, ValueConfig(projection_budget_usd=10.0, n_boot=300))
    pages = {f"{a}|{LEARNER}": f"episodes/{a}__{LEARNER}.html" for a in table["author"]}
    lift = pd.DataFrame([{"round": 0, "author": "cheap", "solver": LEARNER, "is_self_pair": False, "n_envs": 3,
                          "lift": 0.2, "lift_ci_lower": 0.0, "lift_ci_upper": 0.4}])
    training = {LEARNER: {"admitted": 2, "considered": 5, "categories": {"learnable": 2}, "excluded": pd.DataFrame()}}
    html = render(ReportInputs(pair_lift=lift, author_value=table, author_value_mix=mix, episode_pages=pages,
                               training=training))
    assert re.search(rf'<a class="cell-link" href="episodes/cheap__{LEARNER}.html#index">\s*<g class="cell"', html)
    answer = html[html.index('id="answer"'):html.index('id="leaderboard"')]
    assert f'href="episodes/cheap__{LEARNER}.html#index"' in answer
    train = html[html.index('id="training"'):]
    assert all(f'href="episodes/{a}__{LEARNER}.html#index"' in train for a in table["author"])


def test_the_report_check_names_each_problem_of_a_broken_page(tmp_path):
    from envduels_dagster.assets.report.checks import report_problems

    (tmp_path / "episodes").mkdir()
    (tmp_path / "episodes" / "a__b.html").write_text("ok")
    good = ('<tr class="answer" data-learner="b" data-author="a"><a href="episodes/a__b.html#index">'
            '<td class="grand-total" data-usd="0.550000">')
    assert report_problems(good, tmp_path, {"b": "a"}, 0.55) == []
    bad = good.replace("a__b", "a__c") + '<script src="https://cdn.example/x.js"></script>'
    problems = report_problems(bad.replace('data-usd="0.550000"', 'data-usd="0.420000"'), tmp_path, {"b": "z"}, 0.55)
    assert any("<script>" in p for p in problems) and any("external resource" in p for p in problems)
    assert any("episode page episodes/a__c.html is linked but missing" in p for p in problems)
    assert any("answer rows {'b': 'a'} differ from author_value's rank 1 {'b': 'z'}" in p for p in problems)
    assert any("spend total 0.420000 differs from the warehouse's 0.550000" in p for p in problems)
