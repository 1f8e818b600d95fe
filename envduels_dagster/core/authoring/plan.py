"""What each authoring slot is asked for, and when a slot repeats an earlier one (issue 31).

Why: every slot used to send the same prompt but "Environment slot: K of N". Calls are independent, so a
real model at temperature 0 returned the same environment N times, and the copies inflated ``n_envs`` and
narrowed every interval. Now each slot gets its own brief:

* a **domain family**, taken in turn from a configurable list (``ENVDUELS_AUTHOR_DOMAINS``);
* **waves** of ``wave_size`` slots (``ENVDUELS_AUTHOR_WAVE``): the slots of a wave are independent of each
  other (their calls may run at once), and every slot of a later wave is shown the titles of the author's
  valid environments from the earlier waves, "do not repeat these designs".

And a reply whose code is a near-copy of an earlier valid environment of the same author in the batch
is rejected as ``duplicate of <env_id>`` (``core/authoring/duplicates.py``; ``ENVDUELS_AUTHOR_DUPLICATE_THRESHOLD``).

Settings are parsed here (plain values, no Dagster): the resources' ``settings_from_env`` uses the same
parsers, so a bad variable is refused, with the variable and the reason, before anything is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Ten families: the default ten slots an author writes each get their own. The first four are the briefs
# the real-model corpus was written to (../shared/real-model-corpus, slots 4-7).
DEFAULT_DOMAIN_FAMILIES: tuple[str, ...] = (
    "logic puzzles",
    "text-based resource management",
    "string transformation",
    "hidden-rule inference",
    "grid navigation and spatial planning",
    "combinatorial games against an opponent",
    "scheduling and optimization",
    "search with an unreliable oracle",
    "arithmetic and number patterns",
    "word and language games",
)
DEFAULT_DUPLICATE_THRESHOLD = 0.9  # distinct real designs measured <= 0.74, a renamed copy 1.0 (DECISIONS.md)
DEFAULT_WAVE_SIZE = 4
MAX_FAMILY_CHARS = 200
MAX_FAMILIES = 100
MAX_WAVE_SIZE = 1000
MAX_TITLE_CHARS = 160  # one earlier design as the next wave reads it


class AuthoringPlanError(ValueError):
    """An authoring setting that cannot be used (names the setting and why)."""


def parse_families(text: str) -> tuple[str, ...]:
    """``ENVDUELS_AUTHOR_DOMAINS``: families separated by ``;`` or new lines (a family may contain commas)."""
    items = [part.strip() for line in text.splitlines() for part in line.split(";")]
    return check_families([item for item in items if item])


def check_families(families: Sequence[str]) -> tuple[str, ...]:
    if isinstance(families, str):
        raise AuthoringPlanError("a list of domain families is needed, not one string")
    out = tuple(families)
    if not out:
        raise AuthoringPlanError("at least one domain family is needed (separate families with ';')")
    if len(out) > MAX_FAMILIES:
        raise AuthoringPlanError(f"at most {MAX_FAMILIES} domain families, got {len(out)}")
    seen: set[str] = set()
    for family in out:
        if not isinstance(family, str) or not family.strip() or family != family.strip():
            raise AuthoringPlanError(f"domain family {family!r} is blank or has surrounding spaces")
        if len(family) > MAX_FAMILY_CHARS:
            raise AuthoringPlanError(f"domain family {family[:40]!r}... is longer than {MAX_FAMILY_CHARS} characters")
        if any(ord(ch) < 32 for ch in family):
            raise AuthoringPlanError(f"domain family {family!r} contains a control character")
        if family.lower() in seen:
            raise AuthoringPlanError(f"domain family {family!r} is listed twice")
        seen.add(family.lower())
    return out


def parse_threshold(text: str) -> float | None:
    """``ENVDUELS_AUTHOR_DUPLICATE_THRESHOLD``: a similarity in (0, 1], or ``off``."""
    if text.strip().lower() == "off":
        return None
    try:
        value = float(text)
    except ValueError:
        raise AuthoringPlanError("a similarity from 0 (exclusive) to 1, or 'off', is needed") from None
    return check_threshold(value)


def check_threshold(value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 < float(value) <= 1.0:
        raise AuthoringPlanError(f"duplicate threshold {value!r}: a similarity from 0 (exclusive) to 1 is needed")
    return float(value)


def parse_wave_size(text: str) -> int:
    """``ENVDUELS_AUTHOR_WAVE``: slots per wave, 1 to 1000."""
    try:
        value = int(text)
    except ValueError:
        raise AuthoringPlanError(f"a whole number of slots per wave from 1 to {MAX_WAVE_SIZE} is needed") from None
    return check_wave_size(value)


def check_wave_size(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_WAVE_SIZE:
        raise AuthoringPlanError(f"wave size {value!r}: a whole number of slots from 1 to {MAX_WAVE_SIZE} is needed")
    return value


DEFAULT_DOMAIN = "any domain you like"  # the brief every slot gets when nobody asks for another


@dataclass(frozen=True)
class AuthoringPlan:
    """Domain families (cycled over the slots), the duplicate threshold (None: no check), slots per wave, and the
    brief every slot is given (``domain``; a slot's family is added to it, ``prompts.author_messages``)."""

    families: tuple[str, ...] = DEFAULT_DOMAIN_FAMILIES
    duplicate_threshold: float | None = DEFAULT_DUPLICATE_THRESHOLD
    wave_size: int = DEFAULT_WAVE_SIZE
    domain: str = DEFAULT_DOMAIN

    def __post_init__(self) -> None:  # a plan that exists is usable: checked before any call is made
        object.__setattr__(self, "families", check_families(self.families))
        object.__setattr__(self, "duplicate_threshold", check_threshold(self.duplicate_threshold))
        object.__setattr__(self, "wave_size", check_wave_size(self.wave_size))

    def family(self, slot: int) -> str:
        return self.families[slot % len(self.families)]

    def waves(self, count: int) -> list[range]:
        """The slots 0..count-1 cut into consecutive waves of ``wave_size``."""
        return [range(start, min(start + self.wave_size, count)) for start in range(0, count, self.wave_size)]


def design_title(class_name: str, domain: str) -> str:
    """One earlier design as a later wave reads it: the class name and the author's own domain label."""
    title = f"{class_name} ({' '.join(domain.split())})" if domain and domain != "unknown" else class_name
    return title if len(title) <= MAX_TITLE_CHARS else title[: MAX_TITLE_CHARS - 3] + "..."
