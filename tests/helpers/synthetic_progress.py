"""Synthetic two-round tournaments with a known skill -> improvement truth (issue 16 calibration).

Why here: the coverage test (tests/core/rankings/test_progress_interval.py) and the benchmark
(benchmarks/calibration_progress.py) draw from the same generator, so the test is the benchmark at a small size.

Authors m0..m{A-1} also solve. Environment e of author a: base cold rate b_e ~ U(0, 0.1); solver s plays it
cold at b_e + SKILL[s] and hinted at that + the environment's lift L_e ~ U(0.05, 0.15). Its hardened child (round
1) keeps b_e, scales the peers' skill differences by DESIGN_SCALE[a] (p_cold = b_e + SCALE[a] * SKILL[s]) and
lifts by L_e + HINT_GAIN[a] + N(0, 0.03). No rate leaves [0, 1] (the largest is 0.99 at 3 SD of the noise). So an author's true hint change is HINT_GAIN[a]
and its true solver skill is E[b] + SKILL[a]; its true design change (expected change of the observed peer
discrimination at ``seeds`` seeds) has no closed form and is computed once on 4000 environments per author
(:func:`design_truth`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from envduels_dagster.core.stats.discrimination import discrimination_rows
from envduels_dagster.core.stats.ranks import spearman

SKILL = np.linspace(0.25, 0.0, 6)  # m0 strongest solver
HINT_GAIN = np.array([0.00, 0.16, 0.08, 0.32, 0.24, 0.40])  # population rho with skill: -0.886
DESIGN_SCALE = np.array([1.0, 0.6, 1.4, 0.8, 1.2, 0.5])  # population rho (design_truth, 4 seeds): +0.257


def _rates(rng, author: int, envs: int, seeds: int, skill=SKILL, hint_gain=HINT_GAIN, scale=DESIGN_SCALE):
    base, lift0 = rng.uniform(0.0, 0.1, envs), rng.uniform(0.05, 0.15, envs)
    lift1 = lift0 + hint_gain[author] + rng.normal(0, 0.03, envs)
    cold0 = base[:, None] + skill[None, :]
    cold1 = base[:, None] + scale[author] * skill[None, :]
    return [(cold0, cold0 + lift0[:, None]), (cold1, cold1 + lift1[:, None])]


def two_round_tournament(rng: np.random.Generator, envs: int, seeds: int = 4, skill=SKILL, hint_gain=HINT_GAIN,
                         scale=DESIGN_SCALE) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(environments, episodes) of round 0 and one hardening round: what ``authoring_progress`` reads."""
    names = [f"m{i}" for i in range(len(skill))]
    env_rows, frames = [], []
    for a, author in enumerate(names):
        for round_, (cold, hint) in enumerate(_rates(rng, a, envs, seeds, skill, hint_gain, scale)):
            ids = [f"{author}.r{round_}.e{e}" for e in range(envs)]
            env_rows += [{"env_id": i, "author": author, "round": round_, "valid": True,
                          "parent_env_id": f"{author}.r0.e{e}" if round_ else None} for e, i in enumerate(ids)]
            for cond, p in (("cold", cold), ("hinted", hint)):
                y = rng.random((envs, len(names), seeds)) < np.clip(p, 0, 1)[:, :, None]
                e, s, k = np.meshgrid(np.arange(envs), np.arange(len(names)), np.arange(seeds), indexing="ij")
                frames.append(pd.DataFrame({"env_id": np.array(ids)[e.ravel()], "author": author,
                                            "solver": np.array(names)[s.ravel()], "round": round_,
                                            "condition": cond, "seed": k.ravel(),
                                            "status": np.where(y.ravel(), "success", "failure")}))
    return pd.DataFrame(env_rows), pd.concat(frames, ignore_index=True)


def design_truth(seeds: int = 4, envs: int = 4000, seed: int = 12345) -> np.ndarray:
    """Each author's expected change of the observed peer discrimination (Monte Carlo, ``envs`` environments)."""
    rng = np.random.default_rng(seed)
    out = []
    for a in range(len(SKILL)):
        peers = np.arange(len(SKILL)) != a
        d = []
        for cold, _ in _rates(rng, a, envs, seeds):
            r = rng.binomial(seeds, np.clip(cold[:, peers], 0, 1)) / seeds
            d.append(discrimination_rows(r))
        out.append(float(np.mean(d[1] - d[0])))
    return np.array(out)


def population_rho() -> dict[str, float]:
    """Spearman rho of the true solver skill with the true design and hint changes over the authors."""
    return {"design": spearman(SKILL, design_truth()), "hint": spearman(SKILL, HINT_GAIN)}
