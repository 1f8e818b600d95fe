"""Reading registry model strings: which entries are served by a simulated profile, and which one.

Why in core: the rankings compare the emergent order with the profiles' documented skill,
and the lift->learning study trains simulated learners by profile; both used to split
``envduels-sim/<profile>`` by hand in the Dagster layer. The profiles themselves live in
``sim/``; callers pass what they need from there (core never imports ``sim``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from envduels_dagster.core.models.providers import is_simulated


def sim_profile(model: str) -> str | None:
    """``envduels-sim/expert`` -> ``expert`` (the name after a simulated provider's prefix); None otherwise."""
    model = str(model)
    return model.split("/", 1)[1] if is_simulated(model) else None


def sim_skill_ranks(models: Iterable[tuple[str, str]], rank_by_profile: Mapping[str, int]) -> dict[str, int]:
    """Documented skill rank of each (name, model string) served by a known simulated profile."""
    out = {}
    for name, model in models:
        profile = sim_profile(model)
        if profile in rank_by_profile:
            out[name] = rank_by_profile[profile]
    return out
