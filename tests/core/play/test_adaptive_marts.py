"""Adaptive sampling and the marts: seeds played only because earlier outcomes left the verdict open are
tagged ``sampling = 'adaptive'`` and left out of the marts, whose lift is then unbiased (tests/assets/marts/test_marts.py
holds the dbt filter; this file the tagging and the bias it removes)."""

from __future__ import annotations

import asyncio
import random

import numpy as np
import pytest

from envduels_dagster.core.play.adaptive import AdaptivePolicy, play_env_adaptive
from tests.helpers.adaptive_play import Rec, run


def test_only_the_committed_seeds_are_tagged_fixed_and_the_callers_records_stay_untouched():
    # borderline: cold 0/4, hinted 2/4 -> extra seeds up to the cap
    outcomes = {0: ("failure", "success"), 1: ("failure", "failure"), 2: ("failure", "success"),
                3: ("failure", "failure")}
    records, decision, asked = run(outcomes, AdaptivePolicy(min_seeds=1))
    assert len(decision.seeds_played) > 1
    assert [r.sampling for r in records[:2]] == ["fixed", "fixed"]
    assert {r.sampling for r in records[2:]} == {"adaptive"}
    records, _, _ = run(outcomes, AdaptivePolicy(min_seeds=2))
    assert [r.sampling for r in records[:4]] == ["fixed"] * 4 and records[4].sampling == "adaptive"

    shared = {s: (Rec("failure"), Rec("success" if s % 2 == 0 else "failure")) for s in range(8)}

    async def play_seed(seed):
        return shared[seed]

    asyncio.run(play_env_adaptive(play_seed, [0, 1, 2, 3], AdaptivePolicy(), "env"))
    assert {r.sampling for pair in shared.values() for r in pair} == {"fixed"}


def lifts(p_cold: float, p_hint: float, n_envs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-environment lift over every seed played and over the committed seeds, on simulated Bernoulli seeds."""
    rng = random.Random(seed)
    everything, committed = [], []
    for _ in range(n_envs):
        async def play_seed(_seed):
            return (Rec("success" if rng.random() < p_cold else "failure"),
                    Rec("success" if rng.random() < p_hint else "failure"))

        records, _ = asyncio.run(play_env_adaptive(play_seed, [0, 1, 2, 3], AdaptivePolicy(), "env"))
        pairs = list(zip(records[0::2], records[1::2]))

        def mean(ps):
            return np.mean([(h.status == "success") - (c.status == "success") for c, h in ps])

        everything.append(mean(pairs))
        committed.append(mean([(c, h) for c, h in pairs if c.sampling == "fixed"]))
    return np.array(everything), np.array(committed)


@pytest.mark.slow  # about a second or more (--durations, 1 Dec 2026): kept out of the inner loop
def test_averaging_every_seed_played_is_biased_and_the_committed_seeds_are_not():
    for p_cold, p_hint in ((0.2, 0.2), (0.1, 0.6)):
        true_lift = p_hint - p_cold
        everything, committed = lifts(p_cold, p_hint, 3000, seed=int(100 * p_hint))
        se = committed.std(ddof=1) / np.sqrt(committed.size)
        assert abs(committed.mean() - true_lift) < 3 * se + 1e-3, (p_cold, p_hint, committed.mean())
        assert abs(everything.mean() - true_lift) > 0.04, (p_cold, p_hint, everything.mean())
