"""Synthetic lift -> learning tables (learner x author, a learner never studies its own environments).

Why here: the false-positive test (tests/core/studies/test_crossed.py) and the benchmark
(benchmarks/calibration_learning.py) draw from the same generator. Under the null, lift and gain each have a
learner effect and an author effect (all N(0, 1)) and a row noise N(0, noise^2), independent of each other:
there is no association between lift and gain beyond the main effects. ``slope`` adds one: gain gets
slope * (the row part of lift), an association inside the crossing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def crossed_table(rng: np.random.Generator, models: int = 5, noise: float = 0.5, slope: float = 0.0) -> pd.DataFrame:
    names = [f"m{i}" for i in range(models)]
    u, v, a, b = (rng.normal(0, 1, models) for _ in range(4))
    rows = []
    for i, learner in enumerate(names):
        for j, author in enumerate(names):
            if i == j:
                continue
            e = rng.normal(0, noise)
            rows.append({"learner": learner, "author": author, "lift": u[i] + v[j] + e, "n_train_envs": 3,
                         "gain": a[i] + b[j] + slope * e + rng.normal(0, noise)})
    return pd.DataFrame(rows)
