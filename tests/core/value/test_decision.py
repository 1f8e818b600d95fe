"""The sequential decision rule (``core/value/decision.py``, issue 42): pure, on hand-made slot probabilities.
Its error rates on synthetic tournaments are measured by benchmarks/sequential_decision.py (docs/STATISTICS.md)."""

from __future__ import annotations

import numpy as np
import pytest

from envduels_dagster.core.value.decision import DECIDE_P_BEST, decide, p_best, rate_replicates


def test_p_best_is_a_distribution_over_the_authors_and_favours_the_better_one():
    pb = p_best({"a": np.full(30, 0.9), "b": np.full(30, 0.2), "c": np.full(30, 0.2)}, n_boot=1000)
    assert sum(pb.values()) == pytest.approx(1.0) and pb["a"] > 0.99
    same = p_best({"a": np.full(30, 0.5), "b": np.full(30, 0.5)}, n_boot=2000)
    assert abs(same["a"] - 0.5) < 0.06
    # per dollar: b writes less learnable environments but at a tenth of the price
    cost = p_best({"a": np.full(30, 0.6), "b": np.full(30, 0.3)},
                  {"a": np.full(30, 1.0), "b": np.full(30, 0.1)}, n_boot=1000)
    assert cost["b"] > 0.99


def test_four_sure_slots_do_not_give_a_zero_width_rate():
    reps = rate_replicates(np.ones(4), 4000, np.random.default_rng(0))
    lo, hi = np.quantile(reps, [0.025, 0.975])
    assert hi > 0.99 and lo < 0.75  # Jeffreys Beta(4.5, 0.5): a true 0.7 gives 4 of 4 a quarter of the time


def test_a_clear_leader_is_decided_and_equal_authors_are_not():
    clear = decide({"a": np.full(40, 0.9), "b": np.full(40, 0.1)}, n_boot=1000)
    assert clear.decided and clear.leader == "a" and clear.runner_up == "b" and clear.p_best["a"] >= DECIDE_P_BEST
    assert clear.reason.startswith("decided: p_best ")
    even = decide({"a": np.full(40, 0.5), "b": np.full(40, 0.5)}, n_boot=1000)
    assert not even.decided and even.reason.startswith("not yet: p_best ")


def test_an_author_below_the_minimum_blocks_a_decision_and_says_how_many_more():
    d = decide({"a": np.full(40, 0.9), "b": np.full(3, 0.1), "c": np.full(1, 0.1)}, n_boot=200)
    assert not d.decided and d.leader == "a"
    assert d.reason == "insufficient data: every author needs 4 environments (b 1 more, c 3 more)"
    assert not decide({"a": np.full(10, 0.9)}).decided  # one author: nothing to compare
