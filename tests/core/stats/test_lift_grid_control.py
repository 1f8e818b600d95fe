"""The lift grid's family of decisions "lift > 0" (core.stats.multiple.lift_grid_tests): p-values from the t
statistic over environments, Holm / Benjamini-Hochberg control named in the output."""

import numpy as np
import pandas as pd
import pytest
from scipy.stats import ttest_1samp

from envduels_dagster.core.stats.multiple import BH, HOLM, lift_grid_tests


def grid_stats(rng, n_models: int, n_envs: int, lift=None, sd: float = 0.3) -> pd.DataFrame:
    """env_solver_stats-like rows: every author x solver, n_envs environments, per-environment lift ~ N(lift, sd)."""
    lift = lift or {}
    rows = []
    for a in range(n_models):
        for s in range(n_models):
            mu = lift.get((f"m{a}", f"m{s}"), 0.0)
            for e in range(n_envs):
                rows.append({"author": f"m{a}", "solver": f"m{s}", "env_id": f"m{a}.{e}",
                             "lift": float(np.clip(rng.normal(mu, sd), -1, 1))})
    return pd.DataFrame(rows)


def test_p_values_are_the_one_sided_t_test_over_environments():
    rng = np.random.default_rng(1)
    stats = grid_stats(rng, 3, 5, {("m0", "m1"): 0.3})
    out = lift_grid_tests(stats).set_index(["author", "solver"])
    for (a, s), g in stats.groupby(["author", "solver"]):
        expected = ttest_1samp(g["lift"], 0.0, alternative="greater").pvalue
        assert out.loc[(a, s), "p_value"] == pytest.approx(expected, rel=1e-9)
    assert out["method"].eq(HOLM).all()
    assert out.loc[out["is_self_pair"], "p_adjusted"].isna().all()  # self pairs are not in the family
    assert not out.loc[out["is_self_pair"], "decided"].any()


@pytest.mark.slow  # a few seconds or more (measured with --durations, loaded 2-core machine)
def test_holm_keeps_the_family_wise_error_of_a_null_grid_near_5_percent_where_raw_tests_do_not():
    rng = np.random.default_rng(7)
    raw_any, holm_any, bh_any = 0, 0, 0
    n_grids = 150
    for _ in range(n_grids):
        stats = grid_stats(rng, 5, 3)  # 20 peer pairs, all null, 3 environments each (the demo's scale)
        holm_out = lift_grid_tests(stats, method="holm")
        peer = holm_out[~holm_out["is_self_pair"]]
        raw_any += bool((peer["p_value"] <= 0.05).any())
        holm_any += bool(peer["decided"].any())
        bh_any += bool(lift_grid_tests(stats, method="bh")["decided"].any())
    assert raw_any / n_grids > 0.4  # uncorrected: 20 tests at 5% -> about 1 - 0.95^20 = 0.64
    assert holm_any / n_grids <= 0.10
    assert bh_any / n_grids <= 0.10  # all nulls: the false discovery rate is the family-wise rate


def test_planted_lifts_are_decided_and_named():
    rng = np.random.default_rng(3)
    planted = {("m0", "m1"): 0.5, ("m2", "m3"): 0.5}
    out = lift_grid_tests(grid_stats(rng, 4, 10, planted, sd=0.2), method="bh")
    decided = set(map(tuple, out.loc[out["decided"], ["author", "solver"]].to_numpy()))
    assert decided == set(planted)
    assert out["method"].eq(BH).all()


def test_too_few_environments_or_no_spread_give_no_p_value_and_no_decision():
    stats = pd.DataFrame({"author": ["a"] * 2 + ["b"] * 4, "solver": ["b"] * 2 + ["a"] * 4, "env_id": list("uvwxyz"),
                          "lift": [1.0, 1.0, 0.5, 0.5, 0.5, 0.5]})
    out = lift_grid_tests(stats)
    assert out["p_value"].isna().all() and not out["decided"].any()
    assert out["n_envs"].tolist() == [2, 4]
