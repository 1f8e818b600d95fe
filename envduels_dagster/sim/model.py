"""The simulated model behind the gateway: one deterministic function of the request.

Why a pure function of (profile, messages, seed, request): the same request must give the
same reply in-process and over HTTP (``serve-sim``), so cached, resumed and remote runs all
agree. What to do (author, harden, play) and with which parameters comes from the typed
request (``core/models/contract.py``), never from the prompt's wording. A conversation that
arrives without one (any OpenAI client talking to serve-sim) is played as a game.
"""

from __future__ import annotations

import hashlib
import json
import random

from envduels_dagster.core.authoring.prompts import author_messages_v1
from envduels_dagster.core.models.contract import AuthorRequest, HardenRequest, SolveRequest
from envduels_dagster.sim.author import harden_environment, write_environment
from envduels_dagster.sim.profiles import SimProfile, get_profile
from envduels_dagster.sim.solver import solve


class SimulatedModel:
    def __init__(self, profile: SimProfile | str):
        self.profile = get_profile(profile) if isinstance(profile, str) else profile

    def respond(self, messages: list[dict], seed: int | None = None,
                request: AuthorRequest | HardenRequest | SolveRequest | None = None) -> str:
        # The random draws stay seeded from exactly the bytes they always were (profile, seed and
        # messages), so replies, leaderboards and cache keys are unchanged: only the *dispatch and
        # parameters* now come from the typed request instead of the prompt text. An authoring call is
        # seeded from the version-1 messages of its request: the authoring prompt's wording, the slot's
        # family and the earlier designs (issue 31) leave the simulated authors' documented results as they were.
        seeded = author_messages_v1(request) if isinstance(request, AuthorRequest) else messages
        digest = hashlib.sha256(
            json.dumps([self.profile.name, seed, seeded], sort_keys=True).encode()
        ).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        if isinstance(request, HardenRequest):
            return harden_environment(self.profile, request, rng)
        if isinstance(request, AuthorRequest):
            return write_environment(self.profile, request.slot, rng)
        return solve(self.profile, messages, rng, request)


def estimate_usage(messages: list[dict], text: str) -> tuple[int, int]:
    """Token counts the simulated models report, in-process and over HTTP alike (~4 chars a token)."""
    prompt_tokens = sum(len(m["content"]) for m in messages) // 4 + 4 * len(messages)
    return prompt_tokens, max(1, len(text) // 4)
