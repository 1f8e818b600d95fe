"""Coverage of the published training-row lift interval on the rows that are published (the admitted ones).

Seeded, a few seconds. The generators are those of ``test_admission_calibration``: a cluster mixture
(learnable rows a cluster) and the tournament's edge shape (learnable rows rare, on the region's edge), with
8 seeds a row and 200 rows a warehouse, the demo's prior size (5 models x 10 environments x 4 peer solvers;
60 rows on the edge generator, where 200 admit too few rows to measure).
Each fails for one of the two intervals the published one unites, so either half alone fails a test here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from envduels_dagster.core.stats import joint_admission as ja
from envduels_dagster.core.training.training_set import build_training_set
from tests.helpers.synthetic_stats import cluster_warehouse, edge_warehouse

GOAL = 0.93  # the project's coverage goal for a nominal 95% interval


def coverage_on_admitted(generator, warehouses: int, seed: int, seeds: int = 8, rows: int = 200):
    """Coverage of the fitted-prior, uniform-prior and published (robust) intervals on the admitted rows."""
    rng = np.random.default_rng(seed)
    hits: dict[str, list[bool]] = {"fitted": [], "uniform": [], "published": []}
    for _ in range(warehouses):
        pc, ph = generator(rng, rows)
        ph = np.clip(ph, 0, 1)
        n = np.full(rows, float(seeds))
        c, h = rng.binomial(seeds, pc).astype(float), rng.binomial(seeds, ph).astype(float)
        prior = ja.fit_joint_prior(c, h, n)
        admitted = ja.joint_learnable_probability(prior, c, h, n) >= 0.5
        lift = (ph - pc)[admitted]
        args = (c[admitted], h[admitted], n[admitted])
        for name, (lo, hi) in (("fitted", ja.joint_lift_interval(prior, *args)),
                               ("uniform", ja.joint_lift_interval(ja.uniform_prior(), *args)),
                               ("published", ja.robust_lift_interval(prior, *args))):
            hits[name] += list((lo <= lift + 1e-12) & (lift <= hi + 1e-12))
    return {k: float(np.mean(v)) for k, v in hits.items()}, len(hits["published"])


def test_on_the_cluster_generator_the_published_interval_covers_where_the_fitted_prior_alone_does_not():
    cov, n = coverage_on_admitted(lambda rng, rows: cluster_warehouse(rng, rows, 8), warehouses=10, seed=11)
    assert n >= 400
    assert cov["fitted"] < GOAL - 0.02, cov  # the interval published until 2 Dec 2026 (measured 0.90 here)
    assert cov["published"] >= GOAL, cov


def test_on_the_edge_generator_the_published_interval_covers_where_the_uniform_prior_alone_does_not():
    # 60 rows a prior (3 environments an author): the edge generator admits ~1 row a warehouse
    cov, n = coverage_on_admitted(edge_warehouse, warehouses=100, seed=12, rows=60)
    assert n >= 100
    assert cov["uniform"] < GOAL - 0.1, cov  # no shrinkage: the selected rows' high observed lifts taken as true
    assert cov["published"] >= GOAL, cov


def test_published_interval_contains_both_halves_and_is_what_build_training_set_publishes():
    rng = np.random.default_rng(3)
    pc, ph = cluster_warehouse(rng, 60, 8)
    rows = []
    for i, (a, b) in enumerate(zip(pc, ph)):
        solver, author = f"s{i % 3}", f"a{i % 4}"
        for seed in range(8):
            for cond, p in (("cold", a), ("hinted", b)):
                rows.append({"env_id": f"e{i}", "author": author, "solver": solver, "seed": seed, "condition": cond,
                             "status": "success" if rng.random() < p else "failure", "round": 0})
    episodes = pd.DataFrame(rows)
    envs = pd.DataFrame({"env_id": [f"e{i}" for i in range(60)], "author": [f"a{i % 4}" for i in range(60)],
                         "valid": True, "parent_env_id": None, "domain": "d", "class_name": "C", "max_turns": 4,
                         "source_sha256": "0" * 64, "hint": "", "benchmark_seeds": [list(range(8))] * 60})
    ts = build_training_set("s0", episodes, envs)
    assert len(ts.rows) > 0
    from envduels_dagster.core.stats import env_solver_stats

    stats = env_solver_stats(episodes)
    prior = ja.fit_joint_prior(*ja.counts(stats[stats["author"] != stats["solver"]]))
    mine = stats[stats["solver"] == "s0"].set_index("env_id").loc[ts.rows["env_id"]]
    c, h, n = ja.counts(mine)
    lo, hi = ja.robust_lift_interval(prior, c, h, n)
    np.testing.assert_allclose(ts.rows["lift_lower"], lo, atol=1e-12)
    np.testing.assert_allclose(ts.rows["lift_upper"], hi, atol=1e-12)
    for half in (ja.joint_lift_interval(prior, c, h, n), ja.joint_lift_interval(ja.uniform_prior(), c, h, n)):
        assert (lo <= half[0] + 1e-12).all() and (half[1] <= hi + 1e-12).all()
