"""Simulated training: a learner internalizes the hints of the environments it trains on.

Why this rule: the EnvDuels claim is that a hint's lift on an author's environments
predicts how much training on them helps. Our simulated learner learns exactly the
privileged knowledge it was shown (the hints) and applies it, cold, to games it
fits; whether that transfers to *held-out* environments is left to play.
"""

from __future__ import annotations

import dataclasses

from envduels_dagster.core.models.types import ChatResponse, Request
from envduels_dagster.core.protocol import EnvironmentSpec
from envduels_dagster.sim.model import SimulatedModel, estimate_usage
from envduels_dagster.sim.profiles import SimProfile, get_profile


class ProfileGateway:
    """A ``ChatGateway`` for one in-process profile, e.g. a trained learner."""

    def __init__(self, profile: SimProfile):
        self.model = SimulatedModel(profile)
        self.calls = 0

    async def chat(self, model_name: str, messages: list[dict[str, str]], *, seed: int | None = None,
                   request: Request | None = None) -> ChatResponse:
        self.calls += 1
        if request is None:
            request = getattr(messages, "request", None)
        text = self.model.respond(list(messages), seed, request)
        prompt_tokens, completion_tokens = estimate_usage(messages, text)
        return ChatResponse(text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


def trained_profile(profile: SimProfile | str, envs: list[EnvironmentSpec]) -> SimProfile:
    base = get_profile(profile) if isinstance(profile, str) else profile
    hints = tuple(dict.fromkeys(e.hint for e in envs if e.hint))
    return dataclasses.replace(base, learned_hints=base.learned_hints + hints)


def sim_trainer(profile_name: str):
    """Trainer for the study: (training environments) -> gateway playing the trained learner."""
    def train(envs: list[EnvironmentSpec]) -> ProfileGateway:
        return ProfileGateway(trained_profile(profile_name, envs))
    return train
