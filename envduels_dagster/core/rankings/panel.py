"""What the leaderboard is computed from and how: the environment x solver ``Panel`` (from ``env_solver_stats``)
and the ``RankingConfig`` (bootstrap, permutations, the Bradley-Terry prior, alpha, which intervals are published).

Why a module of its own: ``leaderboard`` and the tournament columns it calls (``tournament``, ``population``) all
read the panel; here, below all three, they share it without an import circle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from envduels_dagster.core.stats.bootstrap import ALPHA


@dataclass(frozen=True)
class RankingConfig:
    """How ``compute_rankings`` computes its intervals and tests: ``n_boot`` environment-cluster replicates drawn
    from ``seed``, ``n_perm`` permutations (role separation), the Bradley-Terry prior (``bt_prior``), ``alpha``;
    ``withhold_uncalibrated=False`` keeps every bootstrap interval (for the calibration benchmarks that measure
    them; the product never passes it)."""

    n_boot: int = 1000
    seed: int = 0
    bt_prior: float = 0.5
    n_perm: int = 10000
    alpha: float = ALPHA
    withhold_uncalibrated: bool = True


@dataclass
class Panel:
    """Environment x solver matrices (NaN where the solver has no matched seed on the environment)."""

    env_ids: np.ndarray
    authors: np.ndarray  # author of each environment
    domains: np.ndarray
    solvers: list[str]
    p_cold: np.ndarray  # (E, S)
    p_hint: np.ndarray
    lift: np.ndarray
    n_seeds: np.ndarray | None = None  # (E, S) matched seeds, when the stats carry them

    def __post_init__(self) -> None:
        #: (E, S) True where the solver has results on the environment and did not write it.
        self.peer = ~np.isnan(self.p_cold) & (self.authors[:, None] != np.asarray(self.solvers, dtype=object)[None, :])


def panel_from_stats(stats: pd.DataFrame) -> Panel:
    stats = stats.copy()
    if "domain" not in stats:
        stats["domain"] = "unknown"
    stats["domain"] = stats["domain"].fillna("unknown")
    envs = stats.groupby("env_id", sort=True).agg(author=("author", "first"), domain=("domain", "first"))
    solvers = sorted(stats["solver"].unique())

    def matrix(col: str) -> np.ndarray:
        m = stats.pivot_table(index="env_id", columns="solver", values=col, aggfunc="first")
        return m.reindex(index=envs.index, columns=solvers).to_numpy(dtype=float)

    return Panel(env_ids=envs.index.to_numpy(), authors=envs["author"].to_numpy(dtype=object),
                 domains=envs["domain"].to_numpy(dtype=object), solvers=solvers,
                 p_cold=matrix("p_cold"), p_hint=matrix("p_hint"), lift=matrix("lift"),
                 n_seeds=matrix("n_seeds") if "n_seeds" in stats else None)
