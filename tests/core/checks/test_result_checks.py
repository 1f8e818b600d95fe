"""The result tables' rules (core/checks/results.py) pass on real tables and fail on each kind of bad data.

Each corruption is one edit of a clean table; the test asserts that exactly the check guarding it fails,
with the row named, so a rule that cannot fail (or fails for the wrong reason) shows up here.
"""

import numpy as np
import pandas as pd
import pytest

from envduels_dagster.core.checks import results as rc
from tests.helpers.paths import REPO


@pytest.fixture(scope="module")
def ranked():
    """Real rankings of a small synthetic tournament (the calibration benchmark's generator)."""
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    from calibration import tournament

    from envduels_dagster.core.rankings.leaderboard import RankingConfig, compute_rankings
    from envduels_dagster.core.stats import env_solver_stats

    episodes, _ = tournament(np.random.default_rng(3), 0, 4, 4)
    stats = env_solver_stats(episodes)
    stats["is_self_pair"] = stats["author"] == stats["solver"]
    names = sorted(stats["author"].unique())
    duels = pd.DataFrame([{"model_a": a, "model_b": b, "outcome": "tie", "lift_diff": 0.0, "lift_diff_lower": -0.5,
                           "lift_diff_upper": 0.5, "n_envs_a": 4, "n_envs_b": 4, "diff_df": 6.0,
                           "score_a": 0.5, "lift_diff_se": 0.2}
                          for i, a in enumerate(names) for b in names[i + 1:]])
    return compute_rankings(stats, duels, RankingConfig(n_boot=50, seed=0))


def failing(problems: dict) -> set[str]:
    return {k for k, v in problems.items() if v}


def test_real_rankings_pass_every_rule(ranked):
    table, summary = ranked
    assert failing(rc.rankings_problems(table, summary)) == set()


@pytest.mark.parametrize("edit,check,fragment", [
    (lambda t, s: t.assign(solver_rank=t["solver_rank"].where(t.index != 0, 0)), "ranks_within_1_to_n",
     "solver_rank in [1, 4]"),
    (lambda t, s: t.assign(bt_rank=float(len(t) + 1)), "ranks_within_1_to_n", "bt_rank in [1, 4]"),
    (lambda t, s: t.assign(solver_score_ci_lower=t["solver_score_ci_upper"] + 0.1), "intervals_ordered",
     "solver_score_ci_lower <= solver_score_ci_upper fails: 4 of 4 rows"),
    (lambda t, s: t.assign(author_score_lower=0.0, author_score_upper=1.0), "no_nan_published",
     "author_score interval is set although author_score_interval_reason withholds it"),
    (lambda t, s: t.assign(author_score_ci_upper=np.nan, author_score_ci_lower=0.0), "intervals_ordered",
     "both set or both NULL"),
    (lambda t, s: t.assign(bt_strength=np.where(t.index == 1, np.nan, t["bt_strength"])), "no_nan_published",
     "bt_strength is NaN: 1 of 4 rows"),
    (lambda t, s: t.assign(author_score_ci_lower=np.nan, author_score_ci_upper=np.nan, author_score_ci_reason=None),
     "no_nan_published", "author_score_ci withheld without a reason"),
    (lambda t, s: t.iloc[1:], "sample_sizes_reported", "n_models = 4 but rankings has 3 rows"),
])
def test_rankings_rule_fails_on_its_bad_data(ranked, edit, check, fragment):
    table, summary = ranked
    bad = edit(table.copy(), summary)
    problems = rc.rankings_problems(bad.reset_index(drop=True), summary)
    assert check in failing(problems)
    assert any(fragment in p for p in problems[check]), problems[check]


def test_rankings_summary_without_sample_sizes_fails(ranked):
    table, summary = ranked
    problems = rc.rankings_problems(table, summary.assign(n_envs=0))
    assert failing(problems) == {"sample_sizes_reported"}
    assert problems["sample_sizes_reported"] == ["rankings_summary.n_envs = 0 (expected >= 1)"]


@pytest.fixture(scope="module")
def convergence():
    from envduels_dagster.core.rankings.convergence import design_convergence

    srcs = ["class A:\n    def step(self, a):\n        return a + 1\n", "class B:\n    def step(self, a):\n        if a:\n"
            "            return 2\n        return 3\n", "class C:\n    x = [1, 2]\n    def reset(self):\n        return self.x\n"]
    envs = pd.DataFrame([{"env_id": f"{a}.{i}", "author": a, "domain": "d", "family": "f", "source": srcs[(i + k) % 3]}
                         for k, a in enumerate(["x", "y", "z"]) for i in range(3)])
    return design_convergence(envs, n_perm=200)[0]


def test_real_design_convergence_passes_and_each_corruption_fails(convergence):
    assert failing(rc.design_convergence_problems(convergence)) == set()
    t = convergence.copy()
    row = t.index[t["scope"] == "overall"][0]
    cases = [(t.assign(null_lower=t["null_upper"] + 0.2), "intervals_ordered", "null_lower <= null_upper"),
             (t.assign(similarity=t["similarity"].where(t.index != row, np.nan)), "no_nan_published",
              "similarity is NaN on a row with environment pairs: 1 of"),
             (t.assign(p_value_holm=t["p_value"] / 2), "no_nan_published", "p_value_holm >= p_value fails"),
             (t.assign(p_value=t["p_value"] + 2), "no_nan_published", "p_value in [0, 1] fails"),
             (t.assign(scope=t["scope"].replace("overall", "pair")), "sample_sizes_reported", "0 overall rows"),
             (t.assign(n_env_pairs=np.nan), "sample_sizes_reported", "n_env_pairs is set")]
    for bad, check, fragment in cases:
        problems = rc.design_convergence_problems(bad)
        assert check in failing(problems) and any(fragment in p for p in problems[check]), (check, problems)


def progress_row(**kw):
    row = {"author": "a", "round": 1, "n_pairs": 3, "solver_skill": 0.4, "design_before": 0.2, "design_after": 0.3,
           "design_change": 0.1, "design_change_lower": -0.1, "design_change_upper": 0.3, "hint_before": 0.1,
           "hint_after": 0.1, "hint_change": 0.0, "hint_change_lower": -0.2, "hint_change_upper": 0.2,
           "design_change_reason": None, "hint_change_reason": None}
    return pd.DataFrame([{**row, **kw}])


@pytest.mark.parametrize("kw,check,fragment", [
    ({}, None, None),
    ({"design_change_lower": 0.5}, "intervals_ordered", "design_change_lower <= design_change_upper fails: 1 of 1 "
                                                        "rows, e.g. [row=a@1"),
    ({"hint_change": np.nan, "hint_change_lower": np.nan, "hint_change_upper": np.nan}, "no_nan_published", "hint_change is NaN on a row with lineage pairs"),
    ({"n_pairs": 0}, "sample_sizes_reported", "n_pairs in [1, inf] and set fails"),
    ({"round": 0}, "sample_sizes_reported", "round in [1, inf] and set fails"),
    ({"hint_change_reason": None, "hint_change_lower": np.nan, "hint_change_upper": np.nan}, "no_nan_published",
     "hint_change interval is NULL without hint_change_reason"),
    ({"design_change_reason": "insufficient data: 2 environments"}, "no_nan_published",
     "design_change interval is set although design_change_reason withholds it"),
])
def test_authoring_progress_rules(kw, check, fragment):
    problems = rc.authoring_progress_problems(progress_row(**kw))
    assert failing(problems) == ({check} if check else set())
    if check:
        assert any(fragment in p for p in problems[check]), problems[check]


def learning_row(**kw):
    row = {"learner": "l", "author": "a", "lift": 0.3, "n_train_envs": 2, "n_heldout_envs": 3, "cold_before": 0.25,
           "cold_after": 0.5, "gain": 0.25}
    return pd.DataFrame([{**row, **kw}])


@pytest.mark.parametrize("kw,check,fragment", [
    ({}, None, None),
    ({"lift": np.nan}, None, None),  # no pair_lift row: published as missing, the correlation drops it
    ({"gain": 0.4}, "no_nan_published", "gain = cold_after - cold_before fails"),
    ({"cold_after": np.nan, "gain": np.nan}, "no_nan_published", "cold_after is NaN on a row that trained"),
    ({"cold_after": 1.5, "gain": 1.25}, "no_nan_published", "cold_after in [0, 1] fails"),
    ({"n_heldout_envs": 0}, "sample_sizes_reported", "n_heldout_envs in [1, inf] and set fails"),
])
def test_lift_learning_rules(kw, check, fragment):
    problems = rc.lift_learning_problems(learning_row(**kw))
    assert failing(problems) == ({check} if check else set())
    if check:
        assert any(fragment in p for p in problems[check]), problems[check]


# ------------------------------------------------ figures published as metadata (authoring_progress, lift_learning)
def progress_table_of_five():
    return pd.DataFrame([{"author": a, "round": 1, "n_pairs": 4, "solver_skill": s, "design_change": d,
                          "hint_change": h} for a, s, d, h in (("a", 0.9, 0.1, -0.2), ("b", 0.7, 0.0, 0.0),
                                                                ("c", 0.5, 0.2, 0.1), ("d", 0.3, -0.1, 0.3),
                                                                ("e", 0.1, 0.05, 0.4))])


def progress_figures(table, **kw):
    from envduels_dagster.core.rankings.progress import skill_vs_change

    withheld = "insufficient data: an author has 4 lineage pairs (the interval needs at least 12)"
    figures = {**skill_vs_change(table), "skill_vs_design_change_lower": float("nan"),
               "skill_vs_design_change_upper": float("nan"), "skill_vs_design_change_reason": withheld,
               "skill_vs_hint_change_lower": float("nan"), "skill_vs_hint_change_upper": float("nan"),
               "skill_vs_hint_change_reason": withheld, "skill_vs_change_n_authors": 5,
               "skill_vs_change_n_pairs": 20, "skill_vs_change_n_boot": 0}
    return {**figures, **kw}


@pytest.mark.parametrize("kw,check,fragment", [
    ({}, None, None),
    ({"skill_vs_hint_change_rho": 0.5}, "no_nan_published", "metadata skill_vs_hint_change_rho = 0.5 but the "
                                                            "table gives"),
    ({"skill_vs_design_change_reason": "", "skill_vs_design_change_lower": float("nan")}, "no_nan_published",
     "interval is NULL without skill_vs_design_change_reason"),
    ({"skill_vs_hint_change_reason": "", "skill_vs_hint_change_lower": 0.4, "skill_vs_hint_change_upper": -0.4},
     "intervals_ordered", "skill_vs_hint_change_rho_lower <= skill_vs_hint_change_rho_upper fails"),
    ({"skill_vs_change_n_pairs": None}, "sample_sizes_reported", "skill_vs_change_n_pairs in [0, inf] and set"),
])
def test_published_skill_improvement_figures_are_checked_against_their_table(kw, check, fragment):
    table = progress_table_of_five()
    problems = rc.progress_figure_problems(progress_figures(table, **kw), table)
    assert failing(problems) == ({check} if check else set()), problems
    if check:
        assert any(fragment in p for p in problems[check]), problems[check]
    missing = rc.progress_figure_problems(None, table)
    assert failing(missing) == {"sample_sizes_reported"} and "materialize authoring_progress" in \
        missing["sample_sizes_reported"][0]


def learning_figures(**kw):
    return {"spearman_lift_vs_gain": 0.2, "permutation_p": 0.4, "permutation_p_reason": "", "n_pairs": 2,
            "n_learners": 1, "n_authors": 2, **kw}


@pytest.mark.parametrize("kw,check,fragment", [
    ({}, None, None),
    ({"permutation_p": 0.0}, "no_nan_published", "permutation_p = 0.0 (expected in (0, 1])"),
    ({"permutation_p": float("nan")}, "no_nan_published", "permutation_p is NaN without permutation_p_reason"),
    ({"permutation_p_reason": "insufficient data: 2 rows"}, "no_nan_published", "is set although"),
    ({"permutation_p": float("nan"), "permutation_p_reason": "insufficient data: 2 rows"}, None, None),
    ({"spearman_lift_vs_gain": 1.5}, "no_nan_published", "spearman_lift_vs_gain = 1.5"),
    ({"n_pairs": 3}, "sample_sizes_reported", "n_pairs = 3 but the table has 2 rows that trained"),
    ({"n_learners": None}, "sample_sizes_reported", "n_learners = None"),
])
def test_published_lift_learning_figures_are_checked_against_their_table(kw, check, fragment):
    table = pd.concat([learning_row(author="a"), learning_row(author="b"), learning_row(author="c", n_train_envs=0),
                       learning_row(author="d", lift=np.nan)], ignore_index=True)
    problems = rc.learning_figure_problems(learning_figures(**kw), table)
    assert failing(problems) == ({check} if check else set()), problems
    if check:
        assert any(fragment in p for p in problems[check]), problems[check]
