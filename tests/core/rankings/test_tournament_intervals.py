"""The tournament's intervals from the environment level up (core.rankings.tournament, core.stats.tournament_batch):
duels re-decided per environment replicate, incomplete tournaments, separation, minimum sizes (issue 16)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from envduels_dagster.core import stats as st
from envduels_dagster.core.checks.results import rankings_problems
from envduels_dagster.core.rankings import leaderboard as rk
from envduels_dagster.core.rankings.tournament import decide_duels, duels_from_stats
from envduels_dagster.core.stats.tournament import bradley_terry_fit, observed_triads
from envduels_dagster.core.stats.tournament_batch import bradley_terry_batch, separated, triads_batch
from tests.helpers.synthetic_stats import stats_rows


def test_duel_rule_by_hand():
    # a's 3 environments give b lifts 0.5, 0.75, 1; b's give a 0, 0, 0.25: diff 0.667, Welch t on 3 + 3
    stats = pd.DataFrame({"env_id": ["a1", "a2", "a3", "b1", "b2", "b3"], "author": list("aaabbb"),
                          "solver": list("bbbaaa"), "lift": [0.5, 0.75, 1.0, 0.0, 0.0, 0.25]})
    d = duels_from_stats(stats).iloc[0]
    va, vb = np.var([0.5, 0.75, 1.0], ddof=1), np.var([0, 0, 0.25], ddof=1)
    se = math.sqrt(va / 3 + vb / 3)
    df = (va / 3 + vb / 3) ** 2 / ((va / 3) ** 2 / 2 + (vb / 3) ** 2 / 2)
    assert d.lift_diff == pytest.approx(2 / 3) and d.lift_diff_se == pytest.approx(se) and d.diff_df == pytest.approx(df)
    crit = st.intervals.t_critical(df)
    assert d.outcome == ("a" if 2 / 3 - crit * se > 0 else "tie")
    ci = st.intervals.difference_interval([0.5, 0.75, 1.0], [0, 0, 0.25])
    assert (d.outcome != "tie") == (ci.lower > 0)  # the same decision as core.stats.intervals
    # Identical lifts on one side and the other: no spread, a tie (the mart's "insufficient data")
    flat = stats.assign(lift=[0.5, 0.5, 0.5, 0.0, 0.0, 0.0])
    assert duels_from_stats(flat).iloc[0].outcome == "tie"
    # A replicate that draws a1 three times is the mart's rule on (a1, a1, a1) against b's three environments
    w = np.array([[3, 0, 0, 1, 1, 1], [1, 1, 1, 1, 1, 1]], dtype=float)
    out = decide_duels(stats["lift"].to_numpy()[:, None].repeat(2, 1) * np.array([[0, 1]] * 3 + [[1, 0]] * 3),
                       stats["author"].to_numpy(dtype=object), ["a", "b"], ["a", "b"], w)
    assert out["n"][0, 0, 1] == 3 and out["diff"][0, 0, 1] == pytest.approx(0.5 - 1 / 12)
    resampled = st.intervals.difference_interval([0.5, 0.5, 0.5], [0, 0, 0.25])
    assert out["score"][0, 0, 1] == (1.0 if resampled.lower > 0 else 0.5) and out["score"][0, 1, 0] == 1 - out["score"][0, 0, 1]
    assert out["score"][1, 0, 1] == (1.0 if d.outcome == "a" else 0.5)
    assert out["se"][0, 0, 1] == pytest.approx(math.sqrt(vb / 3))


def test_batched_bradley_terry_and_triads_equal_the_single_versions():
    rng = np.random.default_rng(0)
    for n in (3, 5, 7):
        score = rng.choice([0.0, 0.5, 1.0], size=(40, n, n))
        upper = np.triu(score, 1)
        full = upper + np.swapaxes(np.triu(1 - score, 1), 1, 2)
        fit = bradley_terry_batch(full, prior=0.5)
        ref = np.array([bradley_terry_fit(w, prior=0.5).theta for w in full])
        assert fit.converged.all() and np.abs(fit.theta - ref).max() < 1e-9
        played = np.broadcast_to(~np.eye(n, dtype=bool), full.shape).copy()
        played[:5, 0, 1] = played[:5, 1, 0] = False  # five incomplete tournaments
        tri = triads_batch(full, played)
        for r in range(40):
            c, _, zeta = st.cyclic_triads(full[r])
            obs, complete, _ = observed_triads(np.where(played[r], full[r], 0), played[r])
            assert tri.cyclic[r] == pytest.approx(obs) and tri.n_complete[r] == complete
            assert (math.isnan(tri.zeta[r]) if r < 5 else tri.zeta[r] == pytest.approx(zeta))


def test_known_order_is_recovered_and_replicates_re_decide_duels():
    quality = {"w": 0.05, "x": 0.25, "y": 0.45, "z": 0.65}  # true BT order z > y > x > w
    stats = stats_rows(np.random.default_rng(11), quality, envs=12)
    duels = duels_from_stats(stats)
    table, summary = rk.compute_rankings(stats, duels, rk.RankingConfig(n_boot=400, seed=3, n_perm=100))
    t = table.set_index("model")
    assert t["bt_strength"].idxmax() == "z" and t["bt_strength"].idxmin() == "w"
    assert t["bt_strength_reason"].isna().all() and (t["bt_strength_lower"] < t["bt_strength_upper"]).all()
    assert t.loc["z", "bt_strength_lower"] > t.loc["w", "bt_strength_upper"]  # the extremes are separated
    assert ((t["bt_rank_lower"] >= 1) & (t["bt_rank_upper"] <= 4)).all()
    # The environment replicates do change duel decisions: some duel's decision varies across replicates.
    panel = rk.panel_from_stats(stats)
    models = sorted(quality)
    boot = decide_duels(panel.lift, panel.authors, panel.solvers, models, rk.cluster_weights(panel.authors, 400, 3))
    upper = np.triu_indices(4, 1)
    varies = [len(set(boot["score"][:, i, j])) > 1 for i, j in zip(*upper)]
    assert any(varies) and not all(varies)  # near duels flip, the far ones (z vs w) never do
    assert set(boot["score"][:, models.index("z"), models.index("w")]) == {1.0}
    s = summary.iloc[0]
    assert s.kendall_zeta_lower <= s.kendall_zeta_upper and s.kendall_zeta_reason is None
    assert s.tournament_n_boot == 400 and s.tournament_min_envs_per_author == 12
    assert s.tournament_decision_control.startswith("none") and s.duel_decision_control.startswith("holm")
    assert not any(rankings_problems(table, summary).values())


def test_replicates_are_reproducible_by_seed():
    stats = stats_rows(np.random.default_rng(2), {"w": 0.1, "x": 0.3, "y": 0.4}, envs=6)
    duels = duels_from_stats(stats)
    run = lambda seed: rk.compute_rankings(stats, duels, rk.RankingConfig(n_boot=200, seed=seed, n_perm=100))  # noqa: E731
    (t1, s1), (t2, s2), (t3, _) = run(5), run(5), run(6)
    pd.testing.assert_frame_equal(t1, t2)
    pd.testing.assert_frame_equal(s1, s2)
    cols = ["bt_strength_lower", "bt_strength_upper", "solver_score_lower"]
    assert not t1[cols].equals(t3[cols])


def test_an_incomplete_tournament_has_no_zeta_and_its_missing_duel_is_not_a_loss():
    quality = {"a": 0.6, "b": 0.35, "c": 0.1}
    stats = stats_rows(np.random.default_rng(4), quality, envs=12, skip=("a", "c"))
    duels = duels_from_stats(stats)
    assert sorted(zip(duels.model_a, duels.model_b)) == [("a", "b"), ("b", "c")]  # a - c never dueled
    table, summary = rk.compute_rankings(stats, duels, rk.RankingConfig(n_boot=200, n_perm=100))
    s = summary.iloc[0]
    assert not s.tournament_complete and math.isnan(s.kendall_zeta) and math.isnan(s.kendall_zeta_lower)
    assert "incomplete" in s.kendall_zeta_reason and (s.n_triads, s.n_triads_complete) == (1, 0)
    assert pd.isna(s.cyclic_triads_reason) and s.cyclic_triads_lower == s.cyclic_triads_upper == 0.0
    assert s.cyclic_triads == 0.0  # not the round-robin formula's 1 cycle
    t = table.set_index("model")
    assert t["bt_strength_reason"].isna().all() and np.isfinite(t["bt_strength_lower"]).all()
    # c lost only to b; had the missing a - c duel counted as a loss for c (or a), the strengths would differ
    played = np.array([[False, True, False], [True, False, True], [False, True, False]])
    wins = np.where(played, 0.0, 0.0)
    for a, b, sc in duels[["model_a", "model_b", "score_a"]].itertuples(index=False):
        i, j = sorted(quality).index(a), sorted(quality).index(b)
        wins[i, j], wins[j, i] = sc, 1 - sc
    as_missing = bradley_terry_batch(wins[None], 0.5).theta[0]
    assert t.loc[sorted(quality), "bt_strength"].to_numpy() == pytest.approx(as_missing)
    as_loss = wins.copy()
    as_loss[0, 2] = 1.0
    assert not np.allclose(bradley_terry_batch(as_loss[None], 0.5).theta[0], as_missing)


def test_an_unbeaten_model_is_flagged_separated_and_stays_finite():
    quality = {"top": 0.8, "x": 0.1, "y": 0.1}
    stats = stats_rows(np.random.default_rng(8), quality, envs=12)
    duels = duels_from_stats(stats)
    assert set(duels.loc[duels[["model_a", "model_b"]].eq("top").any(axis=1), "winner"
                         if "winner" in duels else "outcome"]) <= {"a", "b"}  # top's duels are decided
    _, summary = rk.compute_rankings(stats, duels, rk.RankingConfig(n_boot=100, n_perm=100))
    s = summary.iloc[0]
    assert bool(s.bt_separated) and bool(s.bt_converged) and s.bt_boot_converged == 1.0
    assert separated(np.array([[[0, 1, 1], [0, 0, 0.5], [0, 0.5, 0]]])).tolist() == [True]  # 0 never lost
    assert separated(np.array([[[0, 1, 0], [0, 0, 1], [1, 0, 0]]], dtype=float)).tolist() == [False]  # a cycle
    fit = bradley_terry_batch(np.array([[[0, 1.0], [0.0, 0]]]), prior=0.0)  # no prior: no finite maximum
    assert not fit.converged[0]


def test_zeta_and_triad_intervals_need_more_environments_than_bradley_terry():
    stats = stats_rows(np.random.default_rng(3), {"w": 0.1, "x": 0.3, "y": 0.5, "z": 0.7}, envs=6)
    table, summary = rk.compute_rankings(stats, duels_from_stats(stats), rk.RankingConfig(n_boot=100, n_perm=100))
    s = summary.iloc[0]
    assert table["bt_strength_lower"].notna().all() and pd.isna(s.bt_interval_reason)
    assert math.isnan(s.kendall_zeta_lower) and math.isnan(s.cyclic_triads_lower) and not math.isnan(s.kendall_zeta)
    assert "at least 12 per author" in s.kendall_zeta_reason and s.cyclic_triads_reason == s.kendall_zeta_reason
    assert not any(rankings_problems(table, summary).values())


def test_below_the_minimum_the_intervals_are_withheld_with_a_reason():
    stats = stats_rows(np.random.default_rng(6), {"w": 0.1, "x": 0.3, "y": 0.5}, envs=2)
    duels = duels_from_stats(stats)
    table, summary = rk.compute_rankings(stats, duels, rk.RankingConfig(n_boot=100, n_perm=100))
    s = summary.iloc[0]
    assert table["bt_strength_lower"].isna().all() and table["bt_strength"].notna().all()
    assert table["bt_strength_reason"].str.startswith("insufficient data: an author has 2").all()
    assert math.isnan(s.kendall_zeta_lower) and s.kendall_zeta_reason.startswith("insufficient data")
    assert math.isnan(s.role_rho_lower) and s.role_rho_reason.startswith("insufficient data")
    assert not any(rankings_problems(table, summary).values())


def test_the_rankings_checks_fail_on_a_claimed_but_missing_or_inverted_interval():
    stats = stats_rows(np.random.default_rng(2), {"w": 0.1, "x": 0.3, "y": 0.5}, envs=12)
    table, summary = rk.compute_rankings(stats, duels_from_stats(stats), rk.RankingConfig(n_boot=100, n_perm=100))
    assert not any(rankings_problems(table, summary).values())
    bad = summary.assign(kendall_zeta_lower=summary.kendall_zeta_upper + 0.1)
    assert rankings_problems(table, bad)["intervals_ordered"]
    gone = table.copy()
    gone.loc[0, ["bt_strength_lower", "bt_strength_upper"]] = np.nan
    assert any("without bt_strength_reason" in p for p in rankings_problems(gone, summary)["no_nan_published"])
    rank = table.assign(bt_rank_upper=len(table) + 1)
    assert rankings_problems(rank, summary)["ranks_within_1_to_n"]
