"""What a provider offers beyond calls, asked for by capability, never by the provider's name.

Why: the rankings compare the emergent solver order with a documented skill order (a control), and
the lift->learning study trains learners; only some providers can give either (today the simulated
models, a plugin registered through the ``envduels_dagster.providers`` entry point). The Dagster
layer used to import ``sim/`` for them and core parsed ``envduels-sim/<profile>`` strings; now a
provider class declares the capability as an optional attribute and these functions ask for it:

* ``skill_rank(model: str) -> int | None``: the documented skill rank of ``model`` (1 = strongest).
* ``trainer(model: str) -> Callable[[list[EnvironmentSpec]], ChatGateway] | None``: trains a learner
  on environments and returns a gateway that plays it.

A provider without the attribute (litellm's, the lean HTTP client's) simply offers neither.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from envduels_dagster.core.models.providers import capability

if TYPE_CHECKING:
    from envduels_dagster.core.models.types import ChatGateway
    from envduels_dagster.core.protocol import EnvironmentSpec

Trainer = Callable[["list[EnvironmentSpec]"], "ChatGateway"]


class HasModelString(Protocol):
    name: str
    model: str


def skill_ranks(models: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Documented skill rank of each (name, model string) whose provider states one."""
    out = {}
    for name, model in models:
        rank_of = capability(str(model), "skill_rank")
        rank = rank_of(str(model)) if rank_of is not None else None
        if rank is not None:
            out[name] = int(rank)
    return out


def trainers(entries: Iterable[HasModelString]) -> tuple[dict[str, Trainer], list[str]]:
    """(a trainer per entry whose provider can train it, the names of the others) in registry order."""
    found: dict[str, Trainer] = {}
    skipped: list[str] = []
    for entry in entries:
        make = capability(entry.model, "trainer")
        train = make(entry.model) if make is not None else None
        if train is None:
            skipped.append(entry.name)
        else:
            found[entry.name] = train
    return found, skipped
