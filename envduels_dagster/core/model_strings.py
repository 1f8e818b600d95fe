"""Reading registry model strings: which entries are served by a simulated profile, and which one.

Why in core: the rankings compare the emergent order with the profiles' documented skill,
and the lift->learning study trains simulated learners by profile; both used to split
``envduels-sim/<profile>`` by hand in the Dagster layer. The profiles themselves live in
``sim/``; callers pass what they need from there (core never imports ``sim``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from envduels_dagster.core.registry import SIM_PREFIX


def sim_profile(model: str) -> str | None:
    """``envduels-sim/expert`` -> ``expert``; None for any other model string."""
    model = str(model)
    return model[len(SIM_PREFIX):] if model.startswith(SIM_PREFIX) else None


def sim_skill_ranks(models: Iterable[tuple[str, str]], rank_by_profile: Mapping[str, int]) -> dict[str, int]:
    """Documented skill rank of each (name, model string) served by a known simulated profile."""
    out = {}
    for name, model in models:
        profile = sim_profile(model)
        if profile in rank_by_profile:
            out[name] = rank_by_profile[profile]
    return out
