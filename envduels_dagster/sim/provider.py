"""The simulated models as a provider: ``envduels-sim/<profile>`` served in-process.

Why a provider like any other: the engine and the gateway never name the simulated models;
the backend registry (``core/models/providers.py``) resolves this class from the prefix at
call time, and the gateway gives it the same cache, pools and accounting as a real provider.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from envduels_dagster.core.models.types import BackendCall, BackendOptions, BackendTraits, Completion
from envduels_dagster.sim.model import SimulatedModel, estimate_usage
from envduels_dagster.sim.profiles import PROFILES, is_known

if TYPE_CHECKING:
    from envduels_dagster.core.registry import ModelEntry

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

    async def complete(self, entry: ModelEntry, call: BackendCall) -> Completion:
        sim = self._models.get(entry.model)
        if sim is None:
            sim = self._models[entry.model] = SimulatedModel(profile_for_model_string(entry.model))
        text = sim.respond(call.messages, call.seed, call.request)
        prompt_tokens, completion_tokens = estimate_usage(call.messages, text)
        return Completion(text, prompt_tokens, completion_tokens, finish_reason="stop")

    async def aclose(self) -> None:
        return None
