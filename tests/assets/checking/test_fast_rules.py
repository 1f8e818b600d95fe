"""The pandas first pass of the checks (issue 34) never passes a rule great-expectations would fail.

Real great-expectations on small frames: for every expectation the check modules use, on clean
data, violations, missing values, empty selections and odd dtypes, a pandas "pass" must come with a
GX pass, and clean data must be answered by pandas alone (else the pass saves nothing).
"""

import math

import pandas as pd
import pytest

from envduels_dagster.assets.checking import gx_runner
from envduels_dagster.assets.checking.fast_rules import mirrored, surely_passes
from envduels_dagster.assets.checking.gx_runner import Frame, Rule, validate

NAN = float("nan")

# (expectation, kwargs, {frame name: (columns, expected pandas verdict: True = answered, None = either)})
CASES = [
    ("ExpectColumnValuesToBeInSet", {"column": "x", "value_set": ["a", "b"]},
     {"clean": ({"x": ["a", "b", "a"]}, True), "bad": ({"x": ["a", "c"]}, False),
      "nulls": ({"x": ["a", None, "b"]}, True), "all_null": ({"x": [None, None]}, True), "empty": ({"x": []}, True)}),
    ("ExpectColumnValuesToNotBeInSet", {"column": "x", "value_set": ["a"]},
     {"clean": ({"x": ["b", "c"]}, True), "bad": ({"x": ["a", "c"]}, False), "nulls": ({"x": ["b", None]}, True)}),
    ("ExpectColumnValuesToBeBetween", {"column": "x", "min_value": 0, "strict_min": True},
     {"clean": ({"x": [0.5, 1.0]}, True), "edge": ({"x": [0.0, 1.0]}, False), "nan": ({"x": [1.0, NAN]}, True),
      "inf": ({"x": [math.inf, 1.0]}, True), "text": ({"x": ["1", "2"]}, False),
      "all_nan": ({"x": [NAN, NAN]}, True), "empty": ({"x": []}, True)}),
    ("ExpectColumnValuesToBeBetween", {"column": "x", "min_value": 1, "max_value": 1},
     {"clean": ({"x": [1, 1]}, True), "bad": ({"x": [1, 2]}, False), "bools": ({"x": [True, True]}, False)}),
    ("ExpectColumnValuesToBeBetween", {"column": "x", "min_value": 0.0, "max_value": 1.0, "strict_max": True},
     {"clean": ({"x": [0.0, 0.5]}, True), "edge": ({"x": [0.0, 1.0]}, False)}),
    ("ExpectColumnValuesToMatchRegex", {"column": "x", "regex": r"^[A-Z_][A-Z0-9_]*$"},
     {"clean": ({"x": ["API_KEY", "B"]}, True), "bad": ({"x": ["API_KEY", "sk-123"]}, False),
      "nulls": ({"x": ["API_KEY", None]}, True), "numbers": ({"x": [1, 2]}, False),
      "all_null": ({"x": [None]}, True)}),
    ("ExpectColumnValuesToNotMatchRegex", {"column": "x", "regex": "sk-"},
     {"clean": ({"x": ["abc", "def"]}, True), "bad": ({"x": ["sk-1", "x"]}, False)}),
    ("ExpectColumnValuesToBeNull", {"column": "x"},
     {"clean": ({"x": [None, None]}, True), "bad": ({"x": [None, "s"]}, False), "nan": ({"x": [NAN, NAN]}, True),
      "empty": ({"x": []}, True)}),
    ("ExpectColumnValuesToNotBeNull", {"column": "x"},
     {"clean": ({"x": [1, 2]}, True), "bad": ({"x": [1, None]}, False), "empty": ({"x": []}, True),
      "all_null": ({"x": [None, None]}, False)}),
    ("ExpectColumnValuesToBeUnique", {"column": "x"},
     {"clean": ({"x": [1, 2, 3]}, True), "bad": ({"x": [1, 1, 2]}, False), "nulls": ({"x": [1, None, None]}, True)}),
    ("ExpectCompoundColumnsToBeUnique", {"column_list": ["x", "y"]},
     {"clean": ({"x": [1, 1], "y": [1, 2]}, True), "bad": ({"x": [1, 1], "y": [2, 2]}, False),
      "nulls": ({"x": [1, None], "y": [None, 1]}, True)}),
    ("ExpectColumnPairValuesToBeEqual", {"column_A": "x", "column_B": "y"},
     {"clean": ({"x": [1, 2], "y": [1, 2]}, True), "bad": ({"x": [1, 2], "y": [1, 3]}, False),
      "one_null": ({"x": [1, None], "y": [1, 2]}, False), "both_null": ({"x": [1, None], "y": [1, None]}, True),
      "empty": ({"x": [], "y": []}, True)}),
    ("ExpectColumnPairValuesAToBeGreaterThanB", {"column_A": "x", "column_B": "y", "or_equal": True},
     {"clean": ({"x": [6, 6], "y": [3, 6]}, True), "bad": ({"x": [6, 6], "y": [3, 7]}, False),
      "null": ({"x": [6, None], "y": [3, 1]}, False), "both_null": ({"x": [6, None], "y": [3, None]}, True),
      "text": ({"x": ["6"], "y": ["3"]}, False)}),
]


@pytest.mark.parametrize("expectation,kwargs,frames", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_pandas_pass_implies_a_great_expectations_pass(expectation, kwargs, frames):
    assert mirrored(expectation)
    for name, (columns, expected) in frames.items():
        df = pd.DataFrame(columns)
        quick = surely_passes(expectation, kwargs, df)
        if expected is not None:
            assert quick is expected, (name, quick)
        (gx,) = validate("t", [Frame(name, df, [Rule("c", expectation, kwargs, "rule")])], pandas_first=False)
        if quick:
            assert gx.success, f"pandas passed {expectation} on {name!r}, GX failed it"


def test_unknown_expectations_and_arguments_go_to_great_expectations():
    df = pd.DataFrame({"x": [1, 2]})
    assert not surely_passes("ExpectColumnMeanToBeBetween", {"column": "x", "min_value": 0}, df)
    assert not surely_passes("ExpectColumnValuesToBeBetween", {"column": "x", "min_value": 0, "mostly": 0.5}, df)
    assert not surely_passes("ExpectColumnValuesToBeInSet", {"column": "absent", "value_set": [1]}, df)


def test_clean_frames_never_reach_great_expectations_and_failures_do():
    rules = [Rule("c", "ExpectColumnValuesToBeInSet", {"column": "s", "value_set": ["ok"]}, "s is ok"),
             Rule("c", "ExpectColumnValuesToBeBetween", {"column": "n", "min_value": 1}, "n >= 1",
                  where=(("s", "==", "ok"),))]
    before = gx_runner._STATS["gx_rules"]
    (a, b) = validate("t", [Frame("f", pd.DataFrame({"s": ["ok", "ok"], "n": [1, 2]}), rules)])
    assert a.success and b.success and b.element_count == 2
    assert gx_runner._STATS["gx_rules"] == before
    (a, b) = validate("t", [Frame("f", pd.DataFrame({"s": ["ok", "no"], "n": [0, 2]}), rules, index=["n"])])
    assert not a.success and a.unexpected_count == 1 and a.sample == ["n=2, s=no"]
    assert not b.success and b.unexpected_count == 1 and b.element_count == 1
    assert gx_runner._STATS["gx_rules"] == before + 2
