"""The interval of the skill -> improvement rho (core.rankings.progress.skill_change_interval; issue 16).

On synthetic two-round tournaments with a known population rho (tests/helpers/synthetic_progress.py):
published and ordered with enough lineage pairs, NULL with an "insufficient data" reason below the stated
minimum, and it covers the population rho at the rate the benchmark measured.
"""

import numpy as np
import pytest

from envduels_dagster.core.rankings.progress import (
    MIN_PAIRS,
    MIN_RELIABILITY,
    progress_table,
    skill_change_interval,
    skill_vs_change,
)
from tests.helpers.synthetic_progress import HINT_GAIN, population_rho, two_round_tournament


def test_interval_is_published_ordered_and_sized_with_enough_pairs():
    envs, episodes = two_round_tournament(np.random.default_rng(1), envs=12)
    progress = progress_table(envs, episodes)
    rho = skill_vs_change(progress)
    ci = skill_change_interval(envs, episodes, progress=progress, n_boot=200)
    assert ci["skill_vs_hint_change_reason"] is None, ci
    lo, hi = ci["skill_vs_hint_change_lower"], ci["skill_vs_hint_change_upper"]
    assert -1 <= lo <= rho["skill_vs_hint_change_rho"] <= hi <= 1 and hi - lo < 1.5, ci
    assert ci["skill_vs_hint_change_reliability"] >= MIN_RELIABILITY
    assert (ci["skill_vs_change_n_authors"], ci["skill_vs_change_n_pairs"], ci["skill_vs_change_min_pairs"],
            ci["skill_vs_change_min_envs"], ci["skill_vs_change_n_boot"]) == (6, 72, 12, 12, 200)
    assert repr(ci) == repr(skill_change_interval(envs, episodes, n_boot=200))  # same figures when it builds the table


def test_interval_is_null_with_a_reason_below_the_minimum():
    envs, episodes = two_round_tournament(np.random.default_rng(2), envs=MIN_PAIRS - 1)
    ci = skill_change_interval(envs, episodes, n_boot=100)
    for k in ("design", "hint"):
        assert np.isnan(ci[f"skill_vs_{k}_change_lower"]) and np.isnan(ci[f"skill_vs_{k}_change_upper"])
        assert ci[f"skill_vs_{k}_change_reason"] == (
            f"insufficient data: an author has {MIN_PAIRS - 1} lineage pairs (the interval needs at least "
            f"{MIN_PAIRS} per author)")
    assert ci["skill_vs_change_min_pairs"] == MIN_PAIRS - 1  # the size stands beside the NULL
    three = envs["author"].isin(["m0", "m1", "m2"])
    few = skill_change_interval(envs[three], episodes[episodes["author"].isin(["m0", "m1", "m2"])
                                                     & episodes["solver"].isin(["m0", "m1", "m2"])], n_boot=100)
    assert few["skill_vs_hint_change_reason"].startswith("insufficient data: 3 authors"), few


def test_interval_is_null_when_noise_swamps_the_authors_spread():
    """Weak planted gains (x 0.1): the changes are mostly noise and rho is pulled to 0, so no interval."""
    envs, episodes = two_round_tournament(np.random.default_rng(3), envs=12, hint_gain=HINT_GAIN * 0.1)
    ci = skill_change_interval(envs, episodes, n_boot=200)
    assert ci["skill_vs_hint_change_reliability"] < MIN_RELIABILITY
    assert ci["skill_vs_hint_change_reason"].startswith("insufficient data: noise is"), ci
    assert np.isnan(ci["skill_vs_hint_change_lower"])


@pytest.mark.slow  # 30 tournaments: about 10 s
def test_interval_covers_the_population_rho():
    """Benchmark (200 tournaments, docs/BENCHMARKS.md): 0.946 of the 186 published at 12 pairs. Without the pair
    and reliability rules the same interval covered 0.83 at 5 pairs and 0.46 with weaker gains: this can fail."""
    truth = population_rho()["hint"]
    hits = []
    for r in range(30):
        envs, episodes = two_round_tournament(np.random.default_rng(900 + r), envs=12)
        ci = skill_change_interval(envs, episodes, n_boot=200, seed=r)
        if ci["skill_vs_hint_change_reason"] is None:
            hits.append(ci["skill_vs_hint_change_lower"] <= truth <= ci["skill_vs_hint_change_upper"])
    assert len(hits) >= 24, len(hits)  # published in most (benchmark: 0.93 of them)
    assert np.mean(hits) >= 0.85, (np.mean(hits), len(hits))  # P(failing) ~0.03 at coverage 0.945, 0.7 at 0.80


def test_result_rules_accept_the_published_figures_and_name_each_corruption():
    from envduels_dagster.core.checks.results import skill_change_problems

    envs, episodes = two_round_tournament(np.random.default_rng(1), envs=12)
    progress = progress_table(envs, episodes)
    figures = {**skill_vs_change(progress), **{k: "" if v is None else v for k, v in
                                              skill_change_interval(envs, episodes, progress=progress,
                                                                    n_boot=200).items()}}
    assert figures["skill_vs_hint_change_reason"] == ""  # published (the asset writes "" for None)
    assert not any(skill_change_problems(figures).values()), skill_change_problems(figures)
    lo, hi = figures["skill_vs_hint_change_lower"], figures["skill_vs_hint_change_upper"]
    for corrupt, check, says in [
        ({"skill_vs_hint_change_lower": hi, "skill_vs_hint_change_upper": lo}, "intervals_ordered", "<="),
        ({"skill_vs_hint_change_upper": float("nan")}, "intervals_ordered", "both set or both NULL"),
        ({"skill_vs_hint_change_lower": float("nan"), "skill_vs_hint_change_upper": float("nan")},
         "no_nan_published", "NULL without skill_vs_hint_change_reason"),
        ({"skill_vs_hint_change_reason": "insufficient data: x"}, "no_nan_published", "although"),
        ({"skill_vs_change_n_pairs": float("nan")}, "sample_sizes_reported", "skill_vs_change_n_pairs"),
    ]:
        problems = skill_change_problems({**figures, **corrupt})
        assert [c for c, p in problems.items() if p] == [check], (corrupt, problems)
        assert says in problems[check][0], problems[check]
