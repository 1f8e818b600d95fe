"""Skill profiles of the simulated models.

Why documented knob by knob: the simulation decides what the pipeline can find. In the five
default profiles the author knobs are NOT independent of solver skill: hint_quality rises as skill
falls (Spearman -0.7 against the solver order), difficulty rises with skill (+1.0) and feedback_gain
falls with it (-1.0, "weaker models adapt more"), so role separation and the skill-improvement
correlation of the demo are built in, not discovered; and every author renders the same family
templates (sim/families.py), so cross-author design clusters are guaranteed. They stay as they are
because the demo is meant to show every figure with a visible effect (a positive control).

To make each author parameter independent of solver skill, name a profile ``<solver>@<style>``:
the solver knobs of ``<solver>``, the author knobs of ``<style>`` (another profile's name, or one of
AUTHOR_STYLES). ``tests/registries/negative_control.yaml`` gives every model the ``neutral-clean`` style (neutral, sloppiness 0):
authoring is then identical across models, so no role separation and no skill-improvement
correlation exist to be found (tests/core/rankings/test_controls.py).

The ``hints-<level>`` styles plant one effect and nothing else: they are ``neutral`` in every knob but
hint_quality (``hints-none`` 0.0, ``hints-low`` 0.25, ``hints-mid`` 0.5, ``hints-high`` 0.75, ``hints-all``
1.0) and sloppiness, which is 0 for all of them (every environment valid, so no author loses data to
defects). ``tests/registries/planted_control.yaml`` gives the two strongest solvers ``hints-none``, the
middle one ``hints-mid`` and the two weakest ``hints-all``: solver rank and author rank run opposite ways
(role separation planted), and the pipeline must recover it. The extreme levels are the ones used because
their authors' environments are alike (a share of structural hints of exactly 0 or 1); five distinct levels
were not recovered robustly at test scale (docs/STATISTICS.md, Controls). With feedback_gain equal, the
hardening rule (sim/author.py) gives the vague-hint authors, i.e. the strongest solvers, the room to improve
their hints, so skill -> hint change is planted positive as a consequence (measured, not tested in the suite).

Solver knobs (all act on *how* the model plays, never on outcomes):
  precision      chance of choosing the best move its strategy knows (else a random legal one)
  memory         how many past (action, observation) turns it takes into account
  slip           chance of a malformed reply with no \\boxed{} (a format error costing the turn)
  hint_use       chance of understanding and applying a given hint on a turn
  search_budget  how many candidates it can examine when deducing a code
  rules          sequence rules it can recognise unaided, simplest first

Author knobs:
  difficulty     0..1, how hard it tunes its environments (size vs. turn budget)
  hint_quality   chance its hint reveals the structure (else a vague, useless hint)
  sloppiness     chance an environment is defective (leaky hint, unseeded randomness,
                 wrong reference, broken source, or no code at all), which validation rejects
  families       environment families it prefers, in order
  feedback_gain  0..1, how strongly it adapts a hardened version to the digest of how others played
  learned_hints  hints internalized by training on environments: applied cold, like a given hint,
                 to games they fit (only the lift->learning study's trained learners have any)
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class SimProfile:
    name: str
    skill_rank: int  # 1 = strongest solver; documented order the rankings should recover
    precision: float
    memory: int
    slip: float
    hint_use: float
    search_budget: int
    rules: tuple[str, ...]
    difficulty: float
    hint_quality: float
    sloppiness: float
    families: tuple[str, ...]
    feedback_gain: float = 0.5
    learned_hints: tuple[str, ...] = ()  # hints internalized by training (lift->learning study)


PROFILES: dict[str, SimProfile] = {
    p.name: p
    for p in (
        SimProfile("oracle", 1, 0.97, 64, 0.0, 1.0, 5000,
                   ("arithmetic", "geometric", "quadratic", "fibonacci"),
                   difficulty=0.9, hint_quality=0.45, sloppiness=0.05,
                   families=("codelock", "maze", "sequence", "guess"), feedback_gain=0.3),
        SimProfile("expert", 2, 0.85, 24, 0.02, 0.95, 1200,
                   ("arithmetic", "geometric", "quadratic"),
                   difficulty=0.75, hint_quality=0.6, sloppiness=0.08,
                   families=("maze", "codelock", "guess", "sequence"), feedback_gain=0.45),
        SimProfile("journeyman", 3, 0.7, 10, 0.05, 0.85, 300,
                   ("arithmetic", "geometric"),
                   difficulty=0.55, hint_quality=0.9, sloppiness=0.1,
                   families=("guess", "sequence", "maze", "codelock"), feedback_gain=0.6),
        SimProfile("apprentice", 4, 0.5, 5, 0.1, 0.75, 80,
                   ("arithmetic",),
                   difficulty=0.45, hint_quality=0.95, sloppiness=0.15,
                   families=("sequence", "guess", "codelock", "maze"), feedback_gain=0.8),
        SimProfile("novice", 5, 0.3, 2, 0.18, 0.6, 20,
                   ("arithmetic",),
                   difficulty=0.25, hint_quality=0.7, sloppiness=0.3,
                   families=("guess", "sequence", "maze", "codelock"), feedback_gain=0.9),
    )
}


AUTHOR_KNOBS = ("difficulty", "hint_quality", "sloppiness", "families", "feedback_gain")

# Author styles that belong to no solver. ``neutral``: the mean of the default profiles' knobs, the
# families in one order: every model writing with it authors the same distribution of environments.
_NEUTRAL = {"difficulty": 0.58, "hint_quality": 0.72, "sloppiness": 0.136,
            "families": ("guess", "sequence", "maze", "codelock"), "feedback_gain": 0.6}
# ``hints-<level>``: neutral in every knob but hint_quality (the level) and sloppiness (0: every environment valid);
# the pipeline-level positive control (tests/registries/planted_control.yaml) plants role separation with them.
HINT_LEVELS = {"none": 0.0, "low": 0.25, "mid": 0.5, "high": 0.75, "all": 1.0}
# ``neutral-clean``: neutral with sloppiness 0 (every environment valid): the negative control's style, so that every
# author keeps all its environments and the role interval (5 environments an author at least) is published.
AUTHOR_STYLES: dict[str, dict] = {
    "neutral": _NEUTRAL,
    "neutral-clean": {**_NEUTRAL, "sloppiness": 0.0},
    **{f"hints-{level}": {**_NEUTRAL, "sloppiness": 0.0, "hint_quality": q}
       for level, q in HINT_LEVELS.items()},
}


def author_style(name: str) -> dict:
    """The author knobs of a style (AUTHOR_STYLES) or of a profile (PROFILES)."""
    if name in AUTHOR_STYLES:
        return dict(AUTHOR_STYLES[name])
    if name in PROFILES:
        return {k: getattr(PROFILES[name], k) for k in AUTHOR_KNOBS}
    raise KeyError(f"unknown author style {name!r}; known: {', '.join([*AUTHOR_STYLES, *PROFILES])}")


def is_known(name: str) -> bool:
    try:
        get_profile(name)
    except KeyError:
        return False
    return True


def get_profile(name: str) -> SimProfile:
    """``oracle`` (a default profile) or ``oracle@neutral`` (oracle's solver knobs, neutral's author knobs)."""
    solver, _, style = name.partition("@")
    try:
        base = PROFILES[solver]
    except KeyError:
        raise KeyError(f"unknown simulated profile {name!r}; known: {', '.join(PROFILES)} "
                       f"(optionally @<author style>)") from None
    return replace(base, name=name, **author_style(style)) if style else base
