"""The categories and the training rule, defined once (DESIGN §6).

Why one place: the category of an (environment, solver) and training-set membership are
decided by the adaptive sampler while it plays (on seed counts), by ``env_solver_stats``
and ``training_candidates`` afterwards (on success rates) and by the dbt model
``env_solver_stats`` (SQL, guarded by tests/assets/marts/test_marts.py). If the Python copies drifted,
an environment the sampler stopped early on could be classified differently downstream.
Both entry points below take rates, so counts are turned into rates first.
"""

from __future__ import annotations

import numpy as np

WASTED, NOISE, LEARNABLE = "wasted", "noise", "learnable"

# Rates are k/n fractions; the tolerance keeps a threshold such as 0.5 inclusive whatever rounding.
_EPS = 1e-12


def categorize(p_cold, p_hint):
    """wasted (passes cold at least once), learnable (fails cold, passes hinted), noise (fails both).

    Scalars give a ``str`` (the adaptive sampler calls this in its inner loop); arrays give an array."""
    if np.ndim(p_cold) == 0 and np.ndim(p_hint) == 0:
        return WASTED if p_cold > 0 else LEARNABLE if p_hint > 0 else NOISE
    p_cold, p_hint = np.asarray(p_cold), np.asarray(p_hint)
    return np.where(p_cold > 0, WASTED, np.where(p_hint > 0, LEARNABLE, NOISE))


def admits(p_cold, p_hint, max_cold: float = 0.0, min_hint: float = 0.5):
    """The training rule: cold success rate <= ``max_cold`` and hinted success rate >= ``min_hint``."""
    return (p_cold <= max_cold + _EPS) & (p_hint >= min_hint - _EPS)  # floats or arrays alike


def is_member(cold: int, hint: int, n: int, max_cold: float = 0.0, min_hint: float = 0.5) -> bool:
    """The training rule on ``n`` matched seeds with ``cold``/``hint`` successes (False without seeds)."""
    return n > 0 and bool(admits(cold / n, hint / n, max_cold, min_hint))


def category(cold: int, hint: int) -> str:
    """The category from success counts (or rates) of the seeds played."""
    return categorize(cold, hint)
