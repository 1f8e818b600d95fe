"""Bounds on the infinite-environment tournament (core.rankings.population): a simultaneous sign set over the
duels, every undetermined pair completed as win / tie / loss (issue 16)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from envduels_dagster.core.checks.results import rankings_problems
from envduels_dagster.core.rankings import leaderboard as rk
from envduels_dagster.core.rankings.population import population_columns
from envduels_dagster.core.rankings.reporting import fmt, transitivity_markdown
from envduels_dagster.core.rankings.tournament import decide_duels, duels_from_stats
from envduels_dagster.core.stats.tournament_batch import bradley_terry_batch
from tests.helpers.synthetic_stats import stats_rows

POP = ["bt_strength_population_lower", "bt_strength_population_upper"]


def panel(stats: pd.DataFrame):
    p = rk.panel_from_stats(stats)
    return p, p.lift, p.authors, p.solvers


def bt_of(score: np.ndarray, prior: float = 0.5) -> np.ndarray:
    return bradley_terry_batch(score[None], prior).theta[0]


def test_every_duel_decided_gives_one_completion_equal_to_the_point():
    """Far-apart authors with many environments: all 6 duels decided at 0.05/6, so the set is one tournament."""
    quality = {"w": 0.0, "x": 0.3, "y": 0.6, "z": 0.9}
    stats = stats_rows(np.random.default_rng(5), quality, envs=30, seeds=8)
    p, lift, authors, solvers = panel(stats)
    names = sorted(quality)
    cols, s = population_columns(p, names, names, prior=0.5)
    assert s["population_undecided_pairs"] == 0 and s["population_patterns"] == 1, s
    order = np.array([[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]], dtype=float)  # z > y > x > w
    truth = bt_of(order)
    np.testing.assert_allclose(cols["bt_strength_population_lower"], truth, atol=1e-9)
    np.testing.assert_allclose(cols["bt_strength_population_upper"], truth, atol=1e-9)
    assert list(cols["bt_rank_population_lower"]) == [4, 3, 2, 1] == list(cols["bt_rank_population_upper"])
    assert s["kendall_zeta_population_lower"] == s["kendall_zeta_population_upper"] == 1.0
    assert s["cyclic_triads_population_upper"] == 0.0


def test_nothing_decided_spans_every_tournament_and_holds_the_all_ties_truth():
    """Identical authors, 3 environments: no duel survives Bonferroni, so 3^6 completions; the bounds are the
    extremes over all 4-model tournaments (an unbeaten model's strength, rank 1..4, zeta 0..1) and hold 0."""
    quality = dict.fromkeys("wxyz", 0.3)
    stats = stats_rows(np.random.default_rng(6), quality, envs=3)
    p, lift, authors, solvers = panel(stats)
    names = sorted(quality)
    cols, s = population_columns(p, names, names, prior=0.5)
    assert s["population_undecided_pairs"] == 6 and s["population_patterns"] == 3 ** 6
    everything = np.array(list(itertools.product([0.0, 0.5, 1.0], repeat=6)))
    score = np.zeros((len(everything), 4, 4))
    for c, (i, j) in enumerate(itertools.combinations(range(4), 2)):
        score[:, i, j], score[:, j, i] = everything[:, c], 1 - everything[:, c]
    theta = bradley_terry_batch(score, 0.5).theta
    np.testing.assert_allclose(cols["bt_strength_population_upper"], theta.max(), atol=1e-9)
    np.testing.assert_allclose(cols["bt_strength_population_lower"], theta.min(), atol=1e-9)
    assert (cols["bt_strength_population_lower"] < 0).all() and (cols["bt_strength_population_upper"] > 0).all()
    assert set(cols["bt_rank_population_lower"]) == {1.0} and set(cols["bt_rank_population_upper"]) == {4.0}
    assert (s["kendall_zeta_population_lower"], s["kendall_zeta_population_upper"]) == (0.0, 1.0)


def test_a_missing_duel_is_undetermined_not_a_loss():
    """x > y and y > z decided; the x-z duel was never played: it may go any way. x > z or a tie keeps the
    order x, y, z; z > x closes a 3-cycle (everyone rank 2, cyclic triads 1)."""
    quality = {"x": 0.9, "y": 0.45, "z": 0.0}
    stats = stats_rows(np.random.default_rng(7), quality, envs=30, seeds=8, skip=("x", "z"))
    p, lift, authors, solvers = panel(stats)
    names = sorted(quality)
    cols, s = population_columns(p, names, names, prior=0.5)
    assert s["population_undecided_pairs"] == 1 and s["population_patterns"] == 3
    t = dict(zip(names, zip(cols["bt_rank_population_lower"], cols["bt_rank_population_upper"], strict=True)))
    assert (t["x"], t["y"], t["z"]) == ((1.0, 2.0), (2.0, 2.0), (2.0, 3.0)), t  # z > x: a cycle, all rank 2
    assert (s["cyclic_triads_population_lower"], s["cyclic_triads_population_upper"]) == (0.0, 1.0)


def test_too_many_undetermined_pairs_are_withheld_with_the_reason():
    quality = dict.fromkeys("vwxyz", 0.3)
    stats = stats_rows(np.random.default_rng(8), quality, envs=3)
    p, lift, authors, solvers = panel(stats)
    names = sorted(quality)
    cols, s = population_columns(p, names, names, prior=0.5, max_patterns=3 ** 9)
    assert all(np.isnan(v).all() for v in cols.values())
    assert s["population_interval_reason"] == ("too many undecided pairs: 10 of 10 duels are not decided at the "
                                               "simultaneous level, 3^10 completions exceed the cap of 19683")
    assert np.isnan(s["kendall_zeta_population_lower"]) and s["population_undecided_pairs"] == 10


def test_decisions_are_the_mart_rule_at_the_bonferroni_level():
    """A duel is fixed exactly when the mart's Welch rule decides it at alpha / K (K = 10 pairs)."""
    quality = {"v": 0.0, "w": 0.1, "x": 0.2, "y": 0.4, "z": 0.7}
    stats = stats_rows(np.random.default_rng(9), quality, envs=12)
    p, lift, authors, solvers = panel(stats)
    names = sorted(quality)
    _, s = population_columns(p, names, names, prior=0.5)
    strict = decide_duels(lift, authors, solvers, names, np.ones((1, len(authors))), 0.05 / 10)["score"][0]
    loose = decide_duels(lift, authors, solvers, names, np.ones((1, len(authors))), 0.05)["score"][0]
    iu = np.triu_indices(5, 1)
    assert s["population_undecided_pairs"] == int(np.sum(strict[iu] == 0.5))
    assert np.sum(strict[iu] != 0.5) < np.sum(loose[iu] != 0.5)  # Bonferroni decides fewer than the mart here
    assert s["population_decision_control"].startswith("Bonferroni over the 10 pairs")


@pytest.mark.parametrize("seed", range(4))
def test_the_marts_tournament_lies_inside_its_population_bounds(seed):
    """The mart decides at 5%, the bounds fix signs only at 5%/K, so the mart's tournament is one completion:
    its strengths, ranks, zeta and triads lie inside (a property of the method, and a data check)."""
    rng = np.random.default_rng(100 + seed)
    quality = dict(zip("vwxyz", rng.uniform(0, 0.6, 5)))
    stats = stats_rows(rng, quality, envs=int(rng.choice([3, 6, 12])))
    table, summary = rk.compute_rankings(stats, duels_from_stats(stats), rk.RankingConfig(n_boot=50, n_perm=100))
    s = summary.iloc[0]
    assert pd.isna(s.population_interval_reason)
    assert (table["solver_min_seeds"] == 4).all() and (table["solver_n_envs"] == 4 * table["author_n_envs"]).all()
    assert (table["bt_strength_population_lower"] <= table["bt_strength"] + 1e-9).all()
    assert (table["bt_strength"] <= table["bt_strength_population_upper"] + 1e-9).all()
    assert (table["bt_rank_population_lower"] <= table["bt_rank"]).all()
    assert (table["bt_rank"] <= table["bt_rank_population_upper"]).all()
    assert s.kendall_zeta_population_lower <= s.kendall_zeta <= s.kendall_zeta_population_upper
    assert not any(rankings_problems(table, summary).values()), rankings_problems(table, summary)
    shown = transitivity_markdown(s)
    assert "Bounds on the infinite-environment tournament" in shown and "Bonferroni over the 10 pairs" in shown
    assert f"zeta in [{fmt(s.kendall_zeta_population_lower)}, {fmt(s.kendall_zeta_population_upper)}]" in shown


def test_rankings_checks_fail_on_broken_population_bounds():
    stats = stats_rows(np.random.default_rng(10), {"x": 0.0, "y": 0.3, "z": 0.6}, envs=6)
    table, summary = rk.compute_rankings(stats, duels_from_stats(stats), rk.RankingConfig(n_boot=50, n_perm=100))
    assert not any(rankings_problems(table, summary).values())
    flipped = table.assign(bt_strength_population_lower=table["bt_strength_population_upper"] + 0.5)
    assert any("bt_strength_population_lower <= bt_strength_population_upper fails" in p
               for p in rankings_problems(flipped, summary)["intervals_ordered"])
    outside = table.assign(bt_strength_population_upper=table["bt_strength"] - 0.1,
                           bt_strength_population_lower=table["bt_strength"] - 0.2)
    assert any("outside its population bounds" in p for p in rankings_problems(outside, summary)["intervals_ordered"])
    silent = summary.assign(population_interval_reason=None, kendall_zeta_population_lower=np.nan,
                            kendall_zeta_population_upper=np.nan)
    assert any("kendall_zeta_population" in p for p in rankings_problems(table, silent)["no_nan_published"])
    ranks = table.assign(bt_rank_population_upper=len(table) + 1.0)
    assert rankings_problems(ranks, summary)["ranks_within_1_to_n"]


@pytest.mark.slow  # ~7 s: ten 5-model rankings
def test_bounds_cover_the_population_tournament_in_the_benchmark_generator():
    """benchmarks/calibration_tournament.py's warehouses (a planted 3-cycle and two clear authors) at 12
    environments: the population tournament's strengths lie inside the bounds in every one of 10 warehouses
    (nominal >= 95% for all five at once; the benchmark measures it over 100 a size)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    import calibration_tournament as ct

    truth = ct.population_truth()
    rng = np.random.default_rng(12)
    covered = 0
    for _ in range(10):
        table, s, _ = ct.one(rng, 12, 4, 20, 0)
        lo, hi = table["bt_strength_population_lower"], table["bt_strength_population_upper"]
        t = pd.Series(truth["bt"]).reindex(lo.index)
        covered += bool(((lo <= t + 1e-9) & (t <= hi + 1e-9)).all())
        assert s.kendall_zeta_population_lower <= truth["zeta"] <= s.kendall_zeta_population_upper
    assert covered == 10, covered


def test_two_models_have_bounds_on_strengths_but_no_zeta_and_pass_the_checks():
    """Zeta needs 3 models: with 2 its population bounds are NULL while the strengths' are set, no problem."""
    stats = stats_rows(np.random.default_rng(13), {"x": 0.0, "y": 0.6}, envs=8)
    table, summary = rk.compute_rankings(stats, duels_from_stats(stats), rk.RankingConfig(n_boot=50, n_perm=10))
    s = summary.iloc[0]
    assert pd.isna(s.population_interval_reason) and np.isnan(s.kendall_zeta_population_lower)
    assert table["bt_strength_population_lower"].notna().all()
    assert not any(rankings_problems(table, summary).values()), rankings_problems(table, summary)
