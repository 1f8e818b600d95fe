"""Simulated authors: write environment source, a hint and a reference from a profile.

The reply is plain text in the same shape we ask real models for (prose, a
```python block, a ```json metadata block), so it goes through the same
parser and validator as any real author's reply.
"""

from __future__ import annotations

import json
import math
import random

from envduels_dagster.core.models.contract import HardenRequest
from envduels_dagster.sim.families import FAMILIES, RULE_HINTS, SEQUENCE_RULES, render
from envduels_dagster.sim.profiles import SimProfile

VAGUE_HINT = "Think carefully and use every clue the game gives you."
DEFECTS = ("leaky_hint", "unseeded_randomness", "wrong_reference", "broken_source", "no_code")


def write_environment(profile: SimProfile, slot: int, rng: random.Random) -> str:
    """Return an author reply for environment number ``slot``."""
    family = profile.families[slot % len(profile.families)]
    difficulty = min(1.0, max(0.0, profile.difficulty + rng.uniform(-0.15, 0.15)))
    structural_hint = rng.random() < profile.hint_quality
    return compose(profile, slot, family, difficulty, structural_hint, rng)


def compose(profile: SimProfile, slot: int, family: str, difficulty: float, structural_hint: bool,
            rng: random.Random) -> str:
    """Source, hint and metadata for one environment; the profile's sloppiness may add a defect."""
    defect = rng.choice(DEFECTS) if rng.random() < profile.sloppiness else None
    if defect == "leaky_hint":
        family = "guess"
    # "oracle@neutral" (a solver with another author style) -> "OracleNeutral": a class name must be an identifier
    style = "".join(part.capitalize() for part in profile.name.replace("@", " ").replace("-", " ").split())
    class_name = f"{family.capitalize()}{style}{slot}"
    salt = rng.randrange(1, 10_000)
    rng_expr = f"random.Random(seed * 1000003 + {salt})"
    if defect == "unseeded_randomness":
        rng_expr = "random.Random()"
    if defect == "leaky_hint":
        rng_expr = f"random.Random({salt})"
    build = {"guess": _guess, "codelock": _codelock, "maze": _maze, "sequence": _sequence}[family]
    tokens, max_turns, hint, offset = build(difficulty, rng)
    tokens["offset"] = offset if defect == "wrong_reference" else ""
    if not structural_hint:
        hint = VAGUE_HINT
    source = render(FAMILIES[family].template, **{"class": class_name}, rng=rng_expr, turns=max_turns, **tokens)
    if defect == "leaky_hint":
        limit, step = tokens["limit"], tokens["step"]
        secret = step * random.Random(salt).randint(1, limit // step)
        hint = f"Between us: the secret is {secret}."
    if defect == "broken_source":
        source = source[: len(source) // 2]
    meta = {"class_name": class_name, "domain": FAMILIES[family].domain, "hint": hint,
            "max_turns": max_turns, "family": family, "difficulty": round(difficulty, 3)}
    if defect == "no_code":
        return ("I would build a guessing game where the player must find a hidden number, "
                "but I will describe it rather than write it out.")
    return (
        f"Here is environment {slot}: a {family} game tuned to difficulty {difficulty:.2f}.\n\n"
        f"```python\n{source}```\n\n```json\n{json.dumps(meta, indent=2)}\n```\n"
    )


def harden_environment(profile: SimProfile, request: HardenRequest, rng: random.Random) -> str:
    """The documented adaptation rule: move difficulty and hint strength toward a split panel.

    From the peer success rates in the request (mean cold c, mean hinted h):
      * rejected parent           -> rewrite the same family at the same difficulty;
      * c > 0.4 (too easy)        -> difficulty += 0.35 * gain;
      * h < 0.6 (hint too weak)   -> with probability gain switch to a structural hint, and if
                                     c < 0.2 as well, difficulty -= 0.25 * gain;
      * otherwise (fails cold, passes hinted) -> keep it, saying why.
    ``gain`` is the profile's feedback_gain: weaker models adapt more, as the EnvDuels study found.
    """
    slot, meta = request.slot, request.parent_meta
    family = meta.get("family") if meta.get("family") in FAMILIES else profile.families[slot % len(profile.families)]
    difficulty = float(meta.get("difficulty", profile.difficulty))
    structural = meta.get("hint", VAGUE_HINT) != VAGUE_HINT
    gain = profile.feedback_gain
    if not request.parent_valid:
        return compose(profile, slot, family, difficulty, structural, rng)
    # The rates as the digest shows them (two decimals), as this rule has always read them.
    rates = [(float(f"{r.cold:.2f}"), float(f"{r.hinted:.2f}")) for r in request.peer_rates]
    if not rates:
        return '```json\n{"keep": true, "reason": "nobody played it yet"}\n```'
    cold = sum(c for c, _ in rates) / len(rates)
    hinted = sum(h for _, h in rates) / len(rates)
    if cold > 0.4:
        return compose(profile, slot, family, min(1.0, difficulty + 0.35 * gain), structural, rng)
    if hinted < 0.6:
        improve = rng.random() < gain
        easier = difficulty - 0.25 * gain if cold < 0.2 else difficulty
        return compose(profile, slot, family, max(0.0, easier), structural or improve, rng)
    reason = f"the panel fails it cold ({cold:.2f}) and passes it hinted ({hinted:.2f})"
    return f'```json\n{{"keep": true, "reason": "{reason}"}}\n```'


def _guess(d: float, rng: random.Random):
    limit = rng.choice([60, 100, 200, 400, 1000][: 2 + int(d * 3.99)][-2:])
    step = rng.choice([5, 10])
    cold_need = math.ceil(math.log2(limit + 1))
    hinted_need = math.ceil(math.log2(limit // step + 1))
    turns = hinted_need + round((1 - d) * (cold_need - hinted_need))
    return {"limit": limit, "step": step}, turns, f"The secret is always a multiple of {step}.", " + 1"


def _codelock(d: float, rng: random.Random):
    length = 3 + (d > 0.4) + (d > 0.8)
    digits = 4 + int(d * 4.99)
    turns = max(3, round(9 - 5 * d))
    hint = "The digits of the code never decrease from left to right."
    return {"length": length, "digits": digits}, turns, hint, '[:-1] + "x"'


def _maze(d: float, rng: random.Random):
    size = 3 + int(d * 4.99)
    width, height = size, max(3, size - rng.randint(0, 1))
    turns = int(width * height * (0.6 + 1.2 * (1 - d))) + 2
    hint = f"The exit is always in the bottom-right corner, cell ({width - 1}, {height - 1})."
    return {"width": width, "height": height}, turns, hint, "[:-1]"


def _sequence(d: float, rng: random.Random):
    rule = SEQUENCE_RULES[min(len(SEQUENCE_RULES) - 1, int(d * len(SEQUENCE_RULES)))]
    shown = 5 if d < 0.6 else 4
    turns = 2 if d > 0.5 else 3
    return {"rule": rule, "shown": shown}, turns, RULE_HINTS[rule], " + 1"
