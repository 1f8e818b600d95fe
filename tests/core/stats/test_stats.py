"""Lift statistics in Python (core.stats) on hand-computed cases, and the coverage of the bootstrap interval.

The same hand-made episode table is run through the dbt model ``env_solver_stats`` in test_marts.py.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from envduels_dagster.core.stats import (
    cluster_bootstrap_mean,
    env_solver_stats,
    matched_seeds,
    pair_lift,
    training_candidates,
)
from tests.helpers.hand_stats import HAND_PAIRS, HAND_STATS, TRUE_LIFT, hand_table


def assert_close(actual, expected) -> None:
    if expected is None:
        assert actual is None or pd.isna(actual)
    elif isinstance(expected, str):
        assert actual == expected
    else:
        assert actual == pytest.approx(expected)


def test_matched_seeds_drop_incomplete_and_unpaired_seeds():
    m = matched_seeds(hand_table())
    e2s = m[(m["env_id"] == "E2") & (m["solver"] == "S")]
    assert sorted(e2s["seed"]) == [0, 1, 2, 3]
    assert len(m) == 24


def test_env_solver_stats_hand_computed():
    stats = env_solver_stats(hand_table()).set_index(["env_id", "solver"])
    assert set(stats.index) == set(HAND_STATS)
    for key, expected in HAND_STATS.items():
        row = stats.loc[key]
        for col, value in zip(["n_seeds", "p_cold", "p_hint", "lift", "rescue", "harm", "category"], expected):
            assert_close(row[col], value)


def test_pair_lift_hand_computed_and_interval_contains_it():
    pl = pair_lift(hand_table(), n_boot=200).set_index(["author", "solver"])
    for key, (n_envs, n_matched, n_incomplete, p_cold, p_hint, lift) in HAND_PAIRS.items():
        row = pl.loc[key]
        assert (row["n_envs"], row["n_matched"], row["n_incomplete"]) == (n_envs, n_matched, n_incomplete)
        assert (row["p_cold"], row["p_hint"], row["lift"]) == pytest.approx((p_cold, p_hint, lift))
        assert row["is_self_pair"] == (key[0] == key[1])
        # the diagnostic bootstrap is withheld below LIFT_BOOT_MIN_ENVS (30), saying so
        assert np.isnan(row["lift_boot_lower"]) and np.isnan(row["lift_boot_upper"])
        assert row["lift_boot_reason"].startswith(f"not calibrated: {n_envs} environment")
    # Shown anyway (boot_min_envs=1): two environments with lifts 0.25 and 0.75 resample to 0.25, 0.5 or 0.75.
    shown = pair_lift(hand_table(), n_boot=200, boot_min_envs=1).set_index(["author", "solver"])
    assert tuple(shown.loc[("A", "S"), ["lift_boot_lower", "lift_boot_upper"]]) == pytest.approx((0.25, 0.75))
    assert shown["lift_boot_reason"].isna().all()


def test_the_diagnostic_bootstrap_is_given_from_its_minimum_and_not_below():
    from envduels_dagster.core.stats.lift import LIFT_BOOT_MIN_ENVS, lift_boot_reason

    rng = np.random.default_rng(3)
    for n, given in ((LIFT_BOOT_MIN_ENVS - 1, False), (LIFT_BOOT_MIN_ENVS, True)):
        rows = [{"env_id": f"e{e}", "author": "A", "solver": "S", "condition": c, "seed": k,
                 "status": "success" if rng.random() < (0.3 if c == "cold" else 0.6) else "failure"}
                for e in range(n) for k in range(4) for c in ("cold", "hinted")]
        row = pair_lift(pd.DataFrame(rows), n_boot=200).iloc[0]
        assert row["n_envs"] == n
        assert (not np.isnan(row["lift_boot_lower"])) is given and (not np.isnan(row["lift_boot_upper"])) is given
        assert (row["lift_boot_reason"] is None) is given, row["lift_boot_reason"]
        if given:
            assert row["lift_boot_lower"] < row["lift_boot_upper"]
    assert lift_boot_reason(1) == ("not calibrated: 1 environment (the percentile bootstrap under-covers below 30; "
                                   "the published interval is lift_ci_lower/lift_ci_upper)")


def test_training_candidates_pick_fails_cold_passes_hinted_from_other_authors():
    stats = env_solver_stats(hand_table())
    assert training_candidates(stats, "S")["env_id"].tolist() == ["E2"]
    assert training_candidates(stats, "T").empty
    assert training_candidates(stats, "A").empty  # E1 is learnable for A, but A wrote it
    assert training_candidates(stats, "A", include_self_authored=True)["env_id"].tolist() == ["E1"]


def test_cluster_bootstrap_degenerate_cases():
    est, lo, hi = cluster_bootstrap_mean([np.array([0.5, 0.0])])  # one cluster: no spread to resample
    assert est == 0.25 and np.isnan(lo) and np.isnan(hi)  # no interval (it used to be zero-width)
    est, lo, hi = cluster_bootstrap_mean([np.array([1.0]), np.array([0.0])], n_boot=500)
    assert est == 0.5 and lo == 0.0 and hi == 1.0
    assert all(np.isnan(x) for x in cluster_bootstrap_mean([]))


def synthetic_lifts(rng: np.random.Generator, n_envs: int, n_seeds: int) -> list[np.ndarray]:
    """One pair: per environment p_cold ~ U(0.1, 0.5), lift ~ U(0, 0.4) (true mean lift 0.2); paired seeds."""
    p_cold = rng.uniform(0.1, 0.5, n_envs)
    p_hint = p_cold + rng.uniform(0.0, 0.4, n_envs)
    cold = rng.random((n_envs, n_seeds)) < p_cold[:, None]
    hinted = rng.random((n_envs, n_seeds)) < p_hint[:, None]
    return list(hinted.astype(float) - cold.astype(float))



def test_cluster_bootstrap_interval_covers_true_lift():
    """>= 90% of 300 simulated pairs (30 environments x 4 seeds) have a 95% interval covering the true lift."""
    rng = np.random.default_rng(20240601)
    covered = []
    for rep in range(300):
        _, lo, hi = cluster_bootstrap_mean(synthetic_lifts(rng, 30, 4), n_boot=1000, seed=rep)
        covered.append(lo <= TRUE_LIFT <= hi)
    coverage = float(np.mean(covered))
    print(f"python cluster-bootstrap coverage: {coverage:.3f}")
    assert coverage >= 0.90


def test_one_training_rule_and_one_category_on_counts_rates_and_arrays():
    from envduels_dagster.core.stats import admits, categorize, category, is_member

    grid = [(c, h, n) for n in range(1, 7) for c in range(n + 1) for h in range(n + 1)]
    cold = np.array([c / n for c, _, n in grid])
    hint = np.array([h / n for _, h, n in grid])
    labels = categorize(cold, hint)
    assert [category(c, h) for c, h, _ in grid] == labels.tolist()
    assert set(labels) == {"wasted", "noise", "learnable"}
    for max_cold, min_hint in ((0.0, 0.5), (0.25, 1 / 3), (0.0, 1.0)):
        member = admits(cold, hint, max_cold, min_hint)
        assert [is_member(c, h, n, max_cold, min_hint) for c, h, n in grid] == member.tolist()
    assert is_member(0, 2, 4) and not is_member(0, 1, 4) and not is_member(1, 4, 4) and not is_member(0, 0, 0)
    assert is_member(0, 1, 3, min_hint=1 / 3)  # the threshold is inclusive despite 1/3 rounding


def test_training_candidates_follow_the_rule_and_env_solver_stats_the_category():
    from envduels_dagster.core.stats import admits, categorize

    stats = env_solver_stats(hand_table())
    assert stats["category"].tolist() == categorize(stats["p_cold"].to_numpy(), stats["p_hint"].to_numpy()).tolist()
    for max_cold, min_hint in ((0.0, 0.5), (0.25, 0.25), (1.0, 0.0)):
        picked = set(training_candidates(stats, "S", max_cold, min_hint)["env_id"])
        mine = stats[stats["solver"] == "S"]
        assert picked == set(mine.loc[admits(mine["p_cold"], mine["p_hint"], max_cold, min_hint), "env_id"])
    assert set(training_candidates(stats, "S")["env_id"]) == {"E2"}


def test_paired_bootstrap_is_the_cluster_bootstrap_of_one_value_clusters():
    from envduels_dagster.core.stats import paired_bootstrap

    deltas = np.random.default_rng(3).normal(0.1, 0.3, 25)
    assert paired_bootstrap(deltas, n_boot=500, seed=4) == cluster_bootstrap_mean([[d] for d in deltas], n_boot=500,
                                                                                  seed=4)
    with_nan = np.append(deltas, np.nan)
    assert paired_bootstrap(with_nan, n_boot=500, seed=4) == paired_bootstrap(deltas, n_boot=500, seed=4)


def test_t_interval_over_environments_by_hand_and_below_its_minimum():
    from envduels_dagster.core.stats import MIN_ENVS, difference_interval, mean_interval

    ci = mean_interval([0.0, 0.25, 0.5])  # mean 0.25, sd 0.25, se 0.25/sqrt(3), t(2) = 4.3027
    assert ci.reason is None and ci.estimate == pytest.approx(0.25)
    half = 4.302652729749 * 0.25 / np.sqrt(3)
    assert (ci.lower, ci.upper) == pytest.approx((0.25 - half, 0.25 + half))
    high = mean_interval([0.75, 1.0, 1.0, 0.5])  # 0.8125 + 3.1824 * 0.1197 > 1: cut to the range of a lift
    assert high.upper == 1.0 and high.lower == pytest.approx(0.8125 - 3.182446305284 * np.std([.75, 1, 1, .5], ddof=1) / 2)
    ci = mean_interval([0.1, 0.2, 0.3, 0.4, np.nan])
    half = 3.182446305284 * np.std([0.1, 0.2, 0.3, 0.4], ddof=1) / 2
    assert (ci.lower, ci.upper) == pytest.approx((0.25 - half, 0.25 + half))
    short = mean_interval([0.5] * (MIN_ENVS - 1) + [np.nan])
    assert short.estimate == 0.5 and np.isnan(short.lower) and np.isnan(short.upper)
    assert short.reason == f"insufficient data: {MIN_ENVS - 1} environments (an interval needs at least {MIN_ENVS})"
    flat = mean_interval([0.25, 0.25, 0.25, 0.25])
    assert np.isnan(flat.lower) and "same value" in flat.reason
    # Welch: var .25 over 3 and 1/24 over 4; se^2 = 1/12 + 1/96; df = se^4 / ((1/12)^2/2 + (1/96)^2/3) = 2.5 -> 2
    d = difference_interval([0.0, 0.5, 1.0], [0.0, 0.25, 0.5, 0.25])
    se = np.sqrt(1 / 12 + 1 / 96)
    assert d.estimate == pytest.approx(0.25) and d.upper - d.estimate == pytest.approx(4.302652729749 * se)
    assert difference_interval([0.0, 1.0], [0.0, 0.5, 1.0]).reason.startswith("insufficient data: 2 environments")


def test_learnable_probability_by_hand_and_its_calibration():
    from scipy.stats import beta

    from envduels_dagster.core.stats import learnable_probability

    p = float(learnable_probability(0, 2, 4))  # Jeffreys: Beta(.5, 4.5) below .25 times Beta(2.5, 2.5) above .5
    assert p == pytest.approx(beta.cdf(0.25, 0.5, 4.5) * 0.5)
    assert learnable_probability(0, 4, 4) > 0.8 > learnable_probability(0, 2, 4) and learnable_probability(1, 4, 4) < 0.5
    # Calibration: environments whose true rates are drawn from the prior-like population; among those given
    # p in a bin, the share truly learnable matches the bin (the posterior is the truth's conditional law).
    rng = np.random.default_rng(11)
    pc, ph = rng.beta(0.5, 0.5, 200000), rng.beta(0.5, 0.5, 200000)
    cold, hint = rng.binomial(4, pc), rng.binomial(4, ph)
    prob = learnable_probability(cold, hint, np.full(cold.shape, 4))
    truth = (pc <= 0.25) & (ph >= 0.5)
    for lo, hi in ((0.0, 0.2), (0.2, 0.5), (0.5, 1.0)):
        sel = (prob >= lo) & (prob < hi)
        assert truth[sel].mean() == pytest.approx(prob[sel].mean(), abs=0.01)


def test_admission_table_rows_carry_probability_and_a_real_interval():
    from envduels_dagster.core.stats import admission_table, expected_false_admissions

    table = admission_table(env_solver_stats(hand_table()), "S", threshold=0.3)
    assert table["env_id"].tolist() == ["E2", "E1"]  # E2: cold 0/4, hinted 3/4; E1: cold 1/4
    assert table["admitted"].tolist() == [True, False]
    assert (table["lift_post_lower"] < table["lift"]).all() and (table["lift"] < table["lift_post_upper"]).all()
    assert (table["lift_post_upper"] - table["lift_post_lower"] > 0.5).all()  # 4 seeds: wide, never zero-width
    assert expected_false_admissions(table) == pytest.approx(1 - table["p_learnable"].iloc[0])


def test_holm_and_benjamini_hochberg_by_hand():
    from envduels_dagster.core.stats.multiple import benjamini_hochberg, holm

    p = np.array([0.01, 0.04, 0.03, np.nan, 0.005])
    # Holm over the 4 defined: sorted .005, .01, .03, .04 -> x4, x3, x2, x1 = .02, .03, .06, .04 -> running max
    assert holm(p)[[4, 0, 2, 1]] == pytest.approx([0.02, 0.03, 0.06, 0.06]) and np.isnan(holm(p)[3])
    # BH: .005*4/1, .01*4/2, .03*4/3, .04*4/4 = .02, .02, .04, .04 (running min from the top)
    assert benjamini_hochberg(p)[[4, 0, 2, 1]] == pytest.approx([0.02, 0.02, 0.04, 0.04])


def test_welch_p_value_decides_exactly_when_the_welch_interval_excludes_zero():
    from envduels_dagster.core.stats import difference_interval
    from envduels_dagster.core.stats.intervals import welch_df
    from envduels_dagster.core.stats.multiple import welch_p_value

    rng = np.random.default_rng(8)
    for _ in range(200):
        a = rng.integers(0, 5, int(rng.integers(3, 9))) / 4
        b = rng.integers(0, 5, int(rng.integers(3, 9))) / 4
        ci = difference_interval(a, b, bounds=(-np.inf, np.inf))
        if ci.reason:
            continue
        se = np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
        p = welch_p_value(ci.estimate, se, welch_df(a.var(ddof=1), a.size, b.var(ddof=1), b.size))
        assert (p < 0.05) == (ci.lower > 0 or ci.upper < 0)


def test_stratified_permutation_keeps_a_between_learner_difference_out_of_the_null():
    from envduels_dagster.core.stats import permutation_pvalue
    from envduels_dagster.core.stats.ranks import stratified_permutation_pvalue

    rng = np.random.default_rng(12)
    # Two learners: the strong one sees higher lifts and gains more overall; within a learner, no association.
    strata = np.repeat(["strong", "weak"], 12)
    x = np.concatenate([rng.normal(1.0, 0.3, 12), rng.normal(0.0, 0.3, 12)])
    y = np.concatenate([rng.normal(1.0, 0.3, 12), rng.normal(0.0, 0.3, 12)])
    pooled_p, _ = permutation_pvalue(x, y, n_perm=2000)
    rho, p, n = stratified_permutation_pvalue(x, y, strata, n_perm=2000)
    assert pooled_p < 0.01 and rho > 0.5 and n == 2000
    assert p > 0.05  # within learners there is nothing: the stratified null knows the learners differ
    y_assoc = x + rng.normal(0, 0.05, 24)  # a real within-learner association is still found
    assert stratified_permutation_pvalue(x, y_assoc, strata, n_perm=2000)[1] < 0.01


def test_lift_learning_correlation_drops_rows_without_training_environments():
    from envduels_dagster.core.studies.learning import correlate

    df = pd.DataFrame({"learner": ["l"] * 5, "author": list("abcde"), "lift": [0.1, 0.2, 0.3, 0.4, 0.5],
                       "n_train_envs": [1, 2, 1, 0, 0], "gain": [0.0, 0.1, 0.2, 0.0, 0.0]})
    rho, p, n = correlate(df)
    assert n == 3 and rho == pytest.approx(1.0)  # the two untrained rows (gain 0 by construction) are out
