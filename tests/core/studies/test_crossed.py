"""The lift -> learning test in its crossed design (core.stats.crossed, core.studies.learning.correlate).

Rows share a learner and an author. Under a null with both effects planted in lift and in gain, the
within-learner shuffle rejects far more often than its level; the published Freedman-Lane test must not.
"""

import numpy as np
import pandas as pd
import pytest

from envduels_dagster.core.stats.crossed import METHOD, crossed_permutation_pvalue
from envduels_dagster.core.stats.ranks import stratified_permutation_pvalue
from envduels_dagster.core.studies.learning import correlate, correlation_summary
from tests.helpers.synthetic_learning import crossed_table


def _rejections(slope: float, reps: int, models: int = 5, n_perm: int = 499) -> tuple[float, float]:
    crossed = learner = 0
    for r in range(reps):
        df = crossed_table(np.random.default_rng(5000 + r), models, slope=slope)
        x, y, ls = df["lift"].to_numpy(), df["gain"].to_numpy(), df["learner"].to_numpy(object)
        crossed += crossed_permutation_pvalue(x, y, ls, df["author"].to_numpy(object), n_perm=n_perm, seed=r)[1] < 0.05
        learner += stratified_permutation_pvalue(x, y, ls, n_perm=n_perm, seed=r)[1] < 0.05
    return crossed / reps, learner / reps


@pytest.mark.slow  # a few seconds (200 tables, two tests each)
def test_crossed_test_holds_its_level_when_learner_and_author_effects_are_planted():
    """Benchmark (1000 tables, docs/BENCHMARKS.md): 0.036 against 0.188 for the within-learner shuffle."""
    crossed, learner_only = _rejections(slope=0.0, reps=200)
    assert crossed <= 0.05, crossed
    assert learner_only >= 0.10, learner_only  # the old test on the same tables: the author crossing leaks


@pytest.mark.slow
def test_crossed_test_finds_an_association_inside_the_crossing():
    crossed, _ = _rejections(slope=2.0, reps=100)
    assert crossed >= 0.5, crossed  # benchmark: 0.707 at 5 models


# lift_learning of the negative-control pipeline (tests/core/rankings/test_controls.py, 1 Dec 2026, 5 models x 5
# environments x 4 seeds): the rows behind the within-learner p = 0.049 that docs/STATISTICS.md traced.
_EPISODES = np.array([12, 12, 8, 8, 12, 12, 8, 8, 12, 12, 8, 8, 12, 12, 12, 8, 12, 12, 12, 8])  # held-out x seeds
_BEFORE = np.array([10, 11, 3, 5, 10, 7, 5, 4, 3, 1, 1, 3, 1, 3, 5, 3, 0, 1, 1, 0]) / _EPISODES  # successes
_AFTER = np.array([12, 12, 7, 8, 7, 7, 6, 6, 2, 6, 6, 5, 2, 7, 2, 0, 1, 7, 1, 1]) / _EPISODES
NEGATIVE_CONTROL = pd.DataFrame({
    "learner": np.repeat(["oracle", "expert", "journeyman", "apprentice", "novice"], 4),
    "author": ["expert", "journeyman", "apprentice", "novice", "oracle", "journeyman", "apprentice", "novice",
               "oracle", "expert", "apprentice", "novice", "oracle", "expert", "journeyman", "novice",
               "oracle", "expert", "journeyman", "apprentice"],
    "lift": [0.4, 0.0625, 0.4, 0.25, 0.25, 0.25, 0.45, 0.35, 0.35, 0.45, 0.25, 0.4, 0.35, 0.4, 0.3125, 0.25,
             0.05, 0.15, 0.0, 0.2],
    "n_train_envs": [5, 4, 5, 5, 5, 4, 5, 5, 5, 5, 5, 5, 5, 5, 4, 5, 5, 5, 4, 5],
    "cold_before": _BEFORE, "cold_after": _AFTER, "gain": _AFTER - _BEFORE,  # float ties as the asset has them
})


def test_the_negative_control_association_is_between_authors_not_inside_the_crossing():
    s = correlation_summary(NEGATIVE_CONTROL)
    assert s["n_pairs"] == 20 and s["n_learners"] == 5 and s["n_authors"] == 5
    assert s["spearman_lift_vs_gain"] == pytest.approx(0.292, abs=0.001)
    assert s["permutation_p_within_learner_only"] < 0.05  # the p the pipeline used to publish (0.049)
    assert s["permutation_p"] > 0.5 and abs(s["partial_rho_lift_vs_gain"]) < 0.2, s  # beyond the main effects
    assert s["permutation_method"] == METHOD and s["permutation_p_reason"] == ""
    by_author = NEGATIVE_CONTROL.groupby("author")[["lift", "gain"]].mean()
    assert by_author.corr(method="spearman").loc["lift", "gain"] == pytest.approx(0.9)  # where it comes from


def test_too_few_rows_for_the_main_effects_give_no_p_and_say_why():
    df = NEGATIVE_CONTROL[NEGATIVE_CONTROL["learner"].isin(["oracle", "expert"])].head(5)
    rho, p, n = correlate(df)
    assert n == 5 and not np.isnan(rho) and np.isnan(p)
    s = correlation_summary(df)
    assert s["permutation_p_reason"].startswith("insufficient data: 5 rows leave"), s
