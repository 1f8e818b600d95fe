"""The simulated models as a provider: ``envduels-sim/<profile>`` served in-process.

Why a provider like any other: the engine and the gateway never name the simulated models;
this class is registered under the ``envduels_dagster.providers`` entry point (pyproject.toml),
the backend registry (``core/models/providers.py``) resolves it from the prefix at call time, and
the gateway gives it the same cache, pools and accounting as a real provider. What the simulated
models offer beyond calls -- a documented skill rank (the rankings' control) and a trainer (the
lift->learning study) -- are the optional capabilities ``skill_rank`` and ``trainer``
(``core/models/capabilities.py``), so no asset imports ``sim/``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from envduels_dagster.core.models.types import BackendCall, BackendOptions, BackendTraits, Completion
from envduels_dagster.sim.model import SimulatedModel, estimate_usage
from envduels_dagster.sim.profiles import PROFILES, is_known

if TYPE_CHECKING:
    from collections.abc import Callable

    from envduels_dagster.core.models.registry import ModelEntry
    from envduels_dagster.core.protocol import EnvironmentSpec
    from envduels_dagster.sim.training import ProfileGateway

SIM_PREFIX = "envduels-sim/"


def profile_for_model_string(model: str) -> str:
    """``envduels-sim/expert`` -> ``expert``."""
    return model[len(SIM_PREFIX):]


class SimBackend:
    simulated: ClassVar[bool] = True
    # no key, no retries (a deterministic in-process model fails the same way again), latency only imitated
    traits: ClassVar[BackendTraits] = BackendTraits(needs_key=False, retries=False, imitates_latency=True)

    def __init__(self, options: BackendOptions):
        self._models: dict[str, SimulatedModel] = {}

    @staticmethod
    def check_model(model: str) -> None:
        profile = profile_for_model_string(model)
        if not is_known(profile):
            raise ValueError(f"unknown simulated profile {profile!r}; known: {', '.join(PROFILES)}")

    @staticmethod
    def skill_rank(model: str) -> int | None:
        """Capability: the profile's documented skill rank (1 = strongest; an author style after ``@``
        changes authoring only, not the rank)."""
        profile = PROFILES.get(profile_for_model_string(model).partition("@")[0])
        return profile.skill_rank if profile is not None else None

    @staticmethod
    def trainer(model: str) -> Callable[[list[EnvironmentSpec]], ProfileGateway]:
        """Capability: (training environments) -> a gateway playing the profile trained on them."""
        from envduels_dagster.sim.training import sim_trainer

        return sim_trainer(profile_for_model_string(model))

    async def complete(self, entry: ModelEntry, call: BackendCall) -> Completion:
        sim = self._models.get(entry.model)
        if sim is None:
            sim = self._models[entry.model] = SimulatedModel(profile_for_model_string(entry.model))
        text = sim.respond(call.messages, call.seed, call.request)
        prompt_tokens, completion_tokens = estimate_usage(call.messages, text)
        return Completion(text, prompt_tokens, completion_tokens, finish_reason="stop")

    async def aclose(self) -> None:
        return None
