"""What the Dagster UI shows: floats rounded for people, the answer in place (never behind "[Show Markdown]")."""

from __future__ import annotations

import dagster as dg
import numpy as np

from envduels_dagster.assets.report.assets import MARKDOWN_LIMIT, answer_entries
from envduels_dagster.assets.shared import rounded_metadata


def test_every_float_of_a_materializations_metadata_is_rounded_and_the_order_kept():
    """Issue 43: duel_episodes showed 0.06944444444444445 and a cost of 0.29105549999999997."""
    md = rounded_metadata({"pass_rate_cold": 0.06944444444444445, "cost_usd": 0.29105549999999997,
                           "lift": np.float64(0.123456789), "wrapped": dg.MetadataValue.float(2.0 / 3.0),
                           "num_rows": 12, "note": "text", "is_self_pair": False})
    assert list(md) == ["pass_rate_cold", "cost_usd", "lift", "wrapped", "num_rows", "note", "is_self_pair"]
    assert md["pass_rate_cold"] == 0.069 and md["cost_usd"] == 0.291 and md["lift"] == 0.123  # round_plain
    assert isinstance(md["lift"], float) and md["wrapped"].value == 0.667
    assert (md["num_rows"], md["note"], md["is_self_pair"]) == (12, "text", False)


def test_a_long_answer_is_split_per_learner_each_under_dagsters_markdown_limit():
    lines = [f"For learner L{i}: pay author A{i}. " + "Because of the evidence. " * 30 for i in range(3)]
    entries = answer_entries(["L0", "L1", "L2"], lines)
    assert list(entries) == ["answer: L0", "answer: L1", "answer: L2"]
    assert all(len(v.value) < MARKDOWN_LIMIT for v in entries.values())
    assert entries["answer: L1"].value.startswith("For learner L1: pay author A1.")
    short = answer_entries(["L0"], ["For learner L0: pay A."])
    assert list(short) == ["answer"] and short["answer"].value == "For learner L0: pay A."
    assert answer_entries([], [])["answer"].value == "author_value has not been materialized yet"


def test_every_dbt_check_has_a_sentence_a_reader_understands():
    """Issue 43: pair_lift's 19 checks were named like `value_between_…t_lower__1___1`, with no description."""
    from envduels_dagster.assets.marts.dbt import build_dbt_marts

    specs = list(build_dbt_marts().check_specs)
    assert specs and all(s.description for s in specs), [s.name for s in specs if not s.description]
    pair = {s.description for s in specs if s.asset_key == dg.AssetKey("pair_lift")}
    assert "lift is between -1 and 1 (or null)" in pair and "one row per (round, author, solver)" in pair
    assert any(d.startswith("lift_ci_lower <= lift <= lift_ci_upper wherever the interval is published") for d in pair)
