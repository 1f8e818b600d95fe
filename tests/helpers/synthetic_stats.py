"""Synthetic per-environment statistics (the rows ``env_solver_stats`` returns) with a known truth, for the rankings,
the tournament and the admission tests: ``panel_stats`` (solvers of given skill), ``stats_rows`` (authors of given
lift), ``cluster_warehouse`` and ``edge_warehouse`` (cold/hinted success rates in the admission's clusters)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def panel_stats(rng: np.random.Generator, skill: dict[str, float], envs_per_author: int = 6) -> pd.DataFrame:
    """env_solver_stats-like rows: solver s passes cold with probability skill[s] on 4 seeds."""
    rows = []
    for author in skill:
        for e in range(envs_per_author):
            for solver, p in skill.items():
                cold = (rng.random(4) < p).mean()
                hint = (rng.random(4) < min(1.0, p + 0.3)).mean()
                rows.append({"env_id": f"{author}.{e}", "author": author, "solver": solver,
                             "domain": ["d1", "d2"][e % 2], "p_cold": cold, "p_hint": hint, "lift": hint - cold,
                             "is_self_pair": author == solver})
    return pd.DataFrame(rows)


def stats_rows(rng: np.random.Generator, quality: dict[str, float], envs: int, seeds: int = 4,
               skip: tuple[str, str] | None = None) -> pd.DataFrame:
    """env_solver_stats rows: author a's environments give every other solver a lift near quality[a].
    ``skip = (x, y)``: x never played y's environments and y never played x's (their duel is missing)."""
    rows = []
    for author, q in quality.items():
        for e in range(envs):
            base = rng.uniform(0.05, 0.3)
            for solver in quality:
                if skip and {author, solver} == set(skip):
                    continue
                cold = (rng.random(seeds) < base).mean()
                hint = (rng.random(seeds) < min(1.0, base + q)).mean()
                rows.append({"env_id": f"{author}.{e}", "author": author, "solver": solver, "domain": "d",
                             "p_cold": cold, "p_hint": hint, "lift": hint - cold, "n_seeds": seeds,
                             "is_self_pair": author == solver})
    return pd.DataFrame(rows)


CLUSTERS = (  # share, p_cold range, p_hint range: wasted, noise, learnable (a cluster), borderline
    (0.3, (0.5, 1.0), (0.5, 1.0)), (0.3, (0.0, 0.1), (0.0, 0.2)), (0.3, (0.0, 0.2), (0.55, 1.0)),
    (0.1, (0.15, 0.35), (0.35, 0.65)))


def cluster_warehouse(rng, rows: int, seeds: int):
    k = rng.choice(len(CLUSTERS), rows, p=[c[0] for c in CLUSTERS])
    pc = np.array([rng.uniform(*CLUSTERS[i][1]) for i in k])
    ph = np.array([rng.uniform(*CLUSTERS[i][2]) for i in k])
    return pc, ph


def edge_warehouse(rng, rows: int):
    """The calibration benchmark's tournament shape: p_hint = p_cold + 0.2 +- 0.15, learnable rows rare on
    the region's edge (p_cold in [0.15, 0.25] with a lift above 0.25)."""
    pc = rng.uniform(0.05, 0.5, rows)
    return pc, pc + 0.2 + rng.uniform(-0.1, 0.1, rows) + rng.uniform(-0.05, 0.05, rows)
