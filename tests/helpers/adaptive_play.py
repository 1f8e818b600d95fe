"""Scripted environments for adaptive seed sampling: ``run(outcomes, policy)`` plays ``play_env_adaptive`` on seeds whose
(cold, hinted) statuses are given, and says which seeds it asked for."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from envduels_dagster.core.play.adaptive import AdaptivePolicy, play_env_adaptive


@dataclass
class Rec:
    status: str
    model_calls: int = 3
    sampling: str = "fixed"

    def model_copy(self, update: dict) -> Rec:  # as EpisodeRecord (pydantic)
        return replace(self, **update)


def scripted(outcomes: dict[int, tuple[str, str]]):
    """play_seed for a scripted environment: seed -> (cold status, hinted status); records what was asked."""
    asked: list[int] = []

    async def play_seed(seed):
        asked.append(seed)
        cold, hint = outcomes.get(seed, ("failure", "failure"))
        return Rec(cold), Rec(hint)

    return play_seed, asked


def run(outcomes, policy=AdaptivePolicy(), seeds=(0, 1, 2, 3)):
    play_seed, asked = scripted(outcomes)
    records, decision = asyncio.run(play_env_adaptive(play_seed, list(seeds), policy, "env"))
    return records, decision, asked
