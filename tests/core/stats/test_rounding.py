"""``core.stats.rounding``: an estimate and its interval rounded to what the interval justifies."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from envduels_dagster.core.stats.rounding import (
    format_estimate,
    interval_columns,
    interval_decimals,
    round_estimate,
    round_plain,
    round_row,
)


@pytest.mark.parametrize(("lower", "upper", "decimals"), [
    (0.37, 0.67, 2),        # half-width 0.15: leading digit 1 keeps two significant digits
    (0.3, 0.7, 1),          # 0.2: one
    (0.0, 1.0, 1),          # 0.5
    (0.41, 0.43, 3),        # 0.01: leading 1, two digits
    (0.41, 0.47, 2),        # 0.03
    (1200.1, 1270.9, -1),   # 35.4: tens
    (-3e9, 3e9, -9),        # huge: billions
    (0.1, 0.1 + 4e-7, 7),   # tiny: 2e-7
    (0.67, 0.37, 2),        # bounds the wrong way round: the width is what counts
    (0.0, 0.2, 2),          # 0.1 exactly (a power of ten): 0.10
    (0.0, 2.0, 1),          # 1.0 exactly: 1.0
    (0.0, 4.0, 0),          # 2
])
def test_the_half_width_sets_the_decimals(lower, upper, decimals):
    assert interval_decimals(lower, upper) == decimals


@pytest.mark.parametrize(("lower", "upper"), [
    (0.5, 0.5), (None, 0.3), (0.1, None), (float("nan"), 0.3), (0.1, float("inf")), (-math.inf, math.inf),
    (pd.NA, 0.2), ("0.1", 0.2), (0.1, 0.1 + 1e-15)])
def test_no_usable_interval_gives_no_decimals(lower, upper):
    assert interval_decimals(lower, upper) is None


def test_estimate_and_bounds_share_the_decimals():
    assert round_estimate(0.52134, 0.37, 0.6712) == (0.52, 0.37, 0.67)
    assert round_estimate(0.52134, 0.013, 0.987) == (0.52, 0.01, 0.99)  # 0.013 is not 0 (issue 42)
    assert round_estimate(1234.567, 1200.1, 1270.9) == (1230.0, 1200.0, 1270.0)
    assert round_estimate(0.3, -50.0, 50.0) == (0.0, -50.0, 50.0)  # the estimate is 0 at the precision it has
    assert round_estimate(0.999999999, 0.99, 1.0) == (1.0, 0.99, 1.0)
    assert round_estimate(-0.0001, -0.3, 0.3) == (0.0, -0.3, 0.3) and math.copysign(1, round_estimate(
        -0.0001, -0.3, 0.3)[0]) == 1  # never "-0.0"


@pytest.mark.parametrize(("estimate", "lower", "upper", "text"), [
    (319, 42.5, 798, "320 [40, 800]"),  # issue 42: was "300 [0, 800]", a positive lower bound shown as 0
    (31000, 4246, 80000, "31000 [4000, 80000]"),  # was "30000 [0, 80000]"
    (-0.1, -0.3, -0.004, "-0.100 [-0.300, -0.004]"),  # a negative upper bound stays negative
    (0.4, 0.0, 0.8, "0.4 [0.0, 0.8]"),  # a bound that is 0 may print as 0
    (0.52, 0.37, 0.67, "0.52 [0.37, 0.67]"),  # bounds far from 0: the half-width rule alone
])
def test_a_bound_that_is_not_zero_never_prints_as_zero(estimate, lower, upper, text):
    assert format_estimate(estimate, lower, upper) == text


def test_without_an_interval_the_plain_rule_and_missing_values_stay_missing():
    assert round_estimate(3.4756860000000005, 0.5, 0.5) == (3.476, 0.5, 0.5)  # zero width: plain
    assert round_estimate(0.9999999999999999, None, None) == (1.0, None, None)
    assert round_estimate(None, 0.1, 0.3) == (None, 0.1, 0.3)
    assert round_estimate(float("nan"), float("nan"), 0.3) == (None, None, 0.3)
    assert round_plain(123456.789) == 123457.0 and round_plain(np.float64(0.12345)) == 0.123
    assert round_plain(float("inf")) is None and round_plain(pd.NA) is None and round_plain(True) is None


def test_as_text():
    assert format_estimate(0.52134, 0.37, 0.6712) == "0.52 [0.37, 0.67]"
    assert format_estimate(0.52134, 0.013, 0.987) == "0.52 [0.01, 0.99]"
    assert format_estimate(1234.567, 1200.1, 1270.9) == "1230 [1200, 1270]"
    assert format_estimate(0.5213) == "0.521" and format_estimate(None, 0.1, 0.2) == "n/a"
    assert format_estimate(0.5, 0.5, 0.5) == "0.5 [0.5, 0.5]"  # zero width: each by the plain rule
    assert format_estimate(2.5e9, 1e9, 4e9) == "2500000000 [1000000000, 4000000000]"
    assert format_estimate(5.5e9, 1e9, 1e10) == "6000000000 [1000000000, 10000000000]"


def test_a_row_rounds_each_estimate_by_its_own_published_interval():
    row = {"model": "a", "solver_score": 0.52134, "solver_score_lower": 0.2, "solver_score_upper": 0.8,
           "solver_score_ci_lower": 0.4901, "solver_score_ci_upper": 0.5523, "solver_score_population_lower": 0.11111,
           "design_score": 0.123456, "design_score_corrected": 0.0987654, "design_score_corrected_lower": 0.05,
           "design_score_corrected_upper": 0.15, "solver_n_envs": 7, "cost_usd": 3.4756860000000005,
           "kendall_tau": 0.9999999999999999, "p_cold": np.float64(np.nan), "priced": True}
    intervals = interval_columns(list(row))
    assert intervals == {"solver_score": ("solver_score_ci_lower", "solver_score_ci_upper"),
                         "design_score_corrected": ("design_score_corrected_lower", "design_score_corrected_upper")}
    out = round_row(row, intervals)
    assert (out["solver_score"], out["solver_score_ci_lower"], out["solver_score_upper"]) == (0.52, 0.49, 0.8)
    assert out["solver_score_population_lower"] == 0.11  # a bound of solver_score: its decimals
    assert out["design_score_corrected"] == 0.1 and out["design_score"] == 0.123  # plain: no interval of its own
    assert out["cost_usd"] == 3.476 and out["kendall_tau"] == 1.0 and out["p_cold"] is None
    assert out["solver_n_envs"] == 7 and out["priced"] is True and out["model"] == "a"
    assert row["solver_score"] == 0.52134  # the input row is left as it was
