"""A hand-computed table of episodes (``hand_table``) with its statistics worked out by hand (``HAND_STATS`` per
environment and solver, ``HAND_PAIRS`` per pair): the Python statistics and the dbt marts are both held to it."""

from __future__ import annotations

import pandas as pd


def episodes(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["env_id", "author", "solver", "condition", "seed", "status"])


def seeds(env: str, author: str, solver: str, cold: list[int], hinted: list[int]) -> list[tuple]:
    out = []
    for seed, (c, h) in enumerate(zip(cold, hinted)):
        out.append((env, author, solver, "cold", seed, "success" if c else "failure"))
        out.append((env, author, solver, "hinted", seed, "success" if h else "failure"))
    return out


def hand_table() -> pd.DataFrame:
    """Author A writes E1 and E2; solvers S and T (peers) and A itself play them on seeds 0-3.

    E2 x S also has seed 4 whose cold episode is incomplete (the seed must drop out, hinted success and all)
    and seed 5 with a hinted episode only (no pair: dropped).
    """
    rows = (seeds("E1", "A", "S", [0, 0, 0, 1], [1, 1, 0, 0])
            + seeds("E2", "A", "S", [0, 0, 0, 0], [1, 1, 1, 0])
            + [("E2", "A", "S", "cold", 4, "incomplete"), ("E2", "A", "S", "hinted", 4, "success"),
               ("E2", "A", "S", "hinted", 5, "success")]
            + seeds("E1", "A", "T", [1, 1, 1, 1], [1, 1, 1, 1])
            + seeds("E2", "A", "T", [0, 0, 0, 0], [0, 0, 0, 0])
            + seeds("E1", "A", "A", [0, 0, 0, 0], [1, 1, 1, 1])
            + seeds("E2", "A", "A", [0, 0, 0, 0], [0, 0, 0, 0]))
    return episodes(rows)


# (env, solver): n_seeds, p_cold, p_hint, lift, rescue, harm, category -- worked out by hand
HAND_STATS = {
    ("E1", "S"): (4, 0.25, 0.50, 0.25, 2 / 3, 1.0, "wasted"),  # cold fails 0,1,2: hinted rescues 0,1; seed 3 harmed
    ("E2", "S"): (4, 0.00, 0.75, 0.75, 0.75, None, "learnable"),
    ("E1", "T"): (4, 1.00, 1.00, 0.00, None, 0.0, "wasted"),
    ("E2", "T"): (4, 0.00, 0.00, 0.00, 0.0, None, "noise"),
    ("E1", "A"): (4, 0.00, 1.00, 1.00, 1.0, None, "learnable"),
    ("E2", "A"): (4, 0.00, 0.00, 0.00, 0.0, None, "noise"),
}


# (author, solver): n_envs, n_matched, n_incomplete, p_cold, p_hint, lift (environments weigh equally)
HAND_PAIRS = {
    ("A", "S"): (2, 8, 1, 0.125, 0.625, 0.5),
    ("A", "T"): (2, 8, 0, 0.5, 0.5, 0.0),
    ("A", "A"): (2, 8, 0, 0.0, 0.5, 0.5),
}


TRUE_LIFT = 0.2
