"""The simulated model behind the gateway: one deterministic function of the request.

Why a pure function of (profile, messages, seed): the same request must give
the same reply in-process and over HTTP (``serve-sim``), so cached, resumed and
remote runs all agree.
"""

from __future__ import annotations

import hashlib
import json
import random
import re

from envduels_dagster.core.authoring import AUTHOR_SYSTEM_PROMPT
from envduels_dagster.sim.author import harden_environment, write_environment
from envduels_dagster.sim.profiles import SimProfile, get_profile
from envduels_dagster.sim.solver import solve

from envduels_dagster.core.registry import SIM_PREFIX  # noqa: E402  (re-exported)


class SimulatedModel:
    def __init__(self, profile: SimProfile | str):
        self.profile = get_profile(profile) if isinstance(profile, str) else profile

    def respond(self, messages: list[dict], seed: int | None = None) -> str:
        digest = hashlib.sha256(
            json.dumps([self.profile.name, seed, messages], sort_keys=True).encode()
        ).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
        if system.startswith(AUTHOR_SYSTEM_PROMPT[:60]):
            user = messages[-1]["content"]
            if "harden your environment" in user[:200]:
                return harden_environment(self.profile, user, rng)
            m = re.search(r"Environment slot: (\d+)", user)
            return write_environment(self.profile, int(m.group(1)) if m else 0, rng)
        return solve(self.profile, messages, rng)


def estimate_usage(messages: list[dict], text: str) -> tuple[int, int]:
    """Token counts the simulated models report, in-process and over HTTP alike (~4 chars a token)."""
    prompt_tokens = sum(len(m["content"]) for m in messages) // 4 + 4 * len(messages)
    return prompt_tokens, max(1, len(text) // 4)


def profile_for_model_string(model: str) -> str:
    """``envduels-sim/expert`` -> ``expert``."""
    return model[len(SIM_PREFIX):]
