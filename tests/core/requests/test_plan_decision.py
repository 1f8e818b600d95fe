"""The plan sized for an answer (issue 42): ``envduels plan`` warns before any call when the size cannot name an
author to pay, and after a pilot states per learner the environments per author, calls and dollars a decision
needs (``core/requests/plan_decision.py``)."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from envduels_dagster.core.requests.plan_decision import decision_sizes, format_sizes, minimum_warning
from tests.helpers.plan_cli import ROLES, plan_cli
from tests.helpers.value_warehouse import LEARNER, env_row, episode_rows

TINY = ROLES.replace("""  - name: a3
    model: openai/some-open-model
    api_base: http://127.0.0.1:9/v1
    roles: [author]
""", "")


def test_three_environments_per_author_warn_that_no_answer_can_come_out_naming_the_minimum(monkeypatch, capsys,
                                                                                          tmp_path):
    code, out, err = plan_cli(monkeypatch, capsys, tmp_path, ROLES, {}, "--envs-per-author", "3")
    assert code == 0, err
    assert err.startswith("warning: 3 environment(s) per author cannot name an author to pay: an author needs 4 "
                          "environments played by the learner to be ranked (AuthorValueSettings.min_envs)")
    assert "plan at least --envs-per-author 4" in err
    kept = json.loads(max((tmp_path / "home" / "plans").glob("plan-*.json")).read_text())
    assert kept["answer"]["warning"].startswith("warning: 3 environment(s)")
    assert not (tmp_path / "home" / "cache").exists()  # said before any call
    code, out, err = plan_cli(monkeypatch, capsys, tmp_path, ROLES, {}, "--envs-per-author", "4")
    assert code == 0 and "warning" not in err and minimum_warning(4) is None
    # nothing measured yet: the plan says what would size it
    assert "size for an answer: nothing measured yet for any learner ('envduels plan --pilot'" in out


def _warehouse(rescued: dict[str, list[int]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    envs, eps = [], []
    for author, per_env in rescued.items():
        for slot, r in enumerate(per_env):
            envs.append(env_row(author, slot, cost=0.01))
            eps += episode_rows(f"{author}.r0.{slot}", author, r)
    return pd.DataFrame(envs), pd.DataFrame(eps)


def test_measured_rates_that_differ_give_a_size_with_its_calls_and_dollars_and_equal_ones_none():
    envs, eps = _warehouse({"good": [4, 4, 4, 0, 4, 4], "poor": [0, 0, 4, 0, 0, 0]})
    priced = []
    sizes = decision_sizes(envs, eps, [LEARNER], price=lambda n: priced.append(n) or (1000.0 * n, 0.25 * n))
    (s,) = sizes
    assert s.learner == LEARNER and s.envs is not None and 8 <= s.envs <= 128 and s.envs % 2 == 0 and priced == [s.envs]
    assert s.rates["good"] > s.rates["poor"] and s.usd == pytest.approx(0.25 * s.envs)
    text = format_sizes(sizes, configured=4)
    assert re.search(rf"  {LEARNER}: {s.envs} environments per author, about [\d,.]+k? calls, \$[\d.,]+ for the whole "
                     rf"experiment at that size \(", text), text
    assert ("the configured size is enough" in text) == (s.envs <= 4)
    # two authors alike: no size separates them, said so, nothing priced
    envs, eps = _warehouse({"same1": [4, 0, 4, 0, 4, 0], "same2": [0, 4, 0, 4, 0, 4]})
    priced.clear()
    (s,) = decision_sizes(envs, eps, [LEARNER], price=lambda n: priced.append(n) or (0.0, 0.0))
    assert s.envs is None and priced == [] and "do not differ enough" in s.note
    assert f"  {LEARNER}: no size: the measured rates" in format_sizes([s], configured=10)


def test_the_size_estimate_grows_as_the_gap_shrinks():
    from envduels_dagster.core.value.decision import envs_needed

    wide = envs_needed({"a": np.full(20, 0.9), "b": np.full(20, 0.1)})
    narrow = envs_needed({"a": np.full(20, 0.6), "b": np.full(20, 0.4)})
    assert wide is not None and narrow is not None and wide < narrow
    assert envs_needed({"a": np.full(20, 0.5), "b": np.full(20, 0.5)}) is None
    assert envs_needed({"a": np.full(20, 0.5)}) is None  # one author: nothing to compare


@pytest.mark.slow  # a real pilot on simulated models, priced and run into its own warehouse
def test_after_a_pilot_the_plan_prints_the_size_for_a_decision_with_its_dollars(monkeypatch, capsys, tmp_path):
    sizes = {"ENVDUELS_ENVS_PER_AUTHOR": "6", "ENVDUELS_SEEDS": "2", "ENVDUELS_ROUNDS": "0"}
    code, out, err = plan_cli(monkeypatch, capsys, tmp_path, TINY, sizes, "--pilot", "--yes")
    assert code == 0, err
    assert "pilot done: " in out
    section = out[out.index("size for an answer (environments per author to name the best author"):]
    line = next(ln for ln in section.splitlines() if ln.startswith("  learner: "))
    # a1 (oracle) and a2 (expert) as measured by the pilot for the learner, then either a priced size or why none
    assert "a1 " in line and "a2 " in line
    assert re.match(r"  learner: (\d+ environments per author, about [\d,.]+k? calls, \$[\d.,]+ for the whole "
                    r"experiment at that size|no size: the measured rates)", line), line
    kept = json.loads(max((tmp_path / "home" / "plans").glob("plan-*.json")).read_text())
    (entry,) = kept["answer"]["sizes"]
    assert entry["learner"] == "learner" and set(entry["rates"]) == {"a1", "a2"}
    assert (entry["envs"] is None) == (entry["usd"] is None)
