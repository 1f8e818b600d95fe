"""Who writes and who plays: the partitions a registry's roles ask for. Pure functions, no Dagster.

Why one object: the authoring partitions, the pair partitions, the learners, the request sensor's
newcomers and the demo must agree on exactly which models author and which play. Before roles every
model did both and ``names x names`` was the answer everywhere; with 3 author-only models and one
target learner that played 16 pairs where the practitioner pays for 3 (issue 30). ``Roster`` is the
single place that turns the registry's ``roles`` (``core/models/registry.py``) into those sets:

* authoring partitions: models with the author role (plus imports, ``import:<name>``, which the
  Dagster layer registers on the author side);
* pair partitions: every author (or import, round 0 only) x every model with the solver role. A model
  with both roles plays its own environments: the self pair is played and flagged, as before
  (DESIGN §5), and excluded from peer metrics;
* learners (training sets, ``author_value``): models with the solver role;
* the tournament (duels, Bradley-Terry, transitivity, role separation): models with both roles.

A registry whose every model has both roles (the default) gives exactly the full tournament of before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from envduels_dagster.core.models.registry import Registry, RegistryError

# The fewest models a figure needs to mean something (DESIGN §6): a ranking needs two ranked models and
# at least one on the other side; a duel two models with both roles; transitivity and role separation three.
MIN_RANKED = 2
MIN_DUEL = 2
MIN_TRIADS = 3


class RosterError(RegistryError):
    """A registry whose roles make no experiment (no author, or no solver): refused before anything runs."""


@dataclasses.dataclass(frozen=True)
class Newcomers:
    """What a registry change adds: models that newly author, models that newly solve (possibly the same)."""

    authors: tuple[str, ...] = ()
    solvers: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.authors or self.solvers)

    @property
    def names(self) -> list[str]:
        return list(dict.fromkeys([*self.authors, *self.solvers]))


@dataclasses.dataclass(frozen=True)
class Roster:
    """The registry's models by role, in registry order, plus imported authors (``import:<name>``)."""

    authors: tuple[str, ...]
    solvers: tuple[str, ...]
    imports: tuple[str, ...] = ()

    @classmethod
    def from_registry(cls, registry: Registry, imports: Iterable[str] = (), *, names: Sequence[str] | None = None,
                      check: bool = True) -> Roster:
        """The roster of ``registry`` (restricted to ``names`` when given); ``check`` refuses a registry with no
        author or no solver (``RosterError``, naming the file and what to change)."""
        keep = set(registry.names if names is None else names)
        models = [m for m in registry.models if m.name in keep]
        roster = cls(tuple(m.name for m in models if m.authors), tuple(m.name for m in models if m.solves),
                     tuple(dict.fromkeys(imports)))
        if check:
            roster.require_experiment(registry.path)
        return roster

    @classmethod
    def everyone(cls, names: Sequence[str], imports: Iterable[str] = ()) -> Roster:
        """Every model authors and solves (the default registry's roster)."""
        return cls(tuple(names), tuple(names), tuple(imports))

    def require_experiment(self, path: str = "registry") -> None:
        """Refuse rosters where nothing would be played: no author (and no import), or no solver."""
        if not self.solvers:
            raise RosterError(path, "no model has the solver role, so nothing would play the environments; give the "
                                    "target learner `roles: [solver]` (or drop `roles` from a model: it then writes "
                                    "and plays)", field="roles")
        if not self.authors and not self.imports:
            raise RosterError(path, "no model has the author role, so no environment would be written; give at least "
                                    "one model `roles: [author]` (or drop `roles` from a model: it then writes and "
                                    "plays), or import an export with `envduels import`", field="roles")

    @property
    def models(self) -> list[str]:
        """Every registry model of the roster (authors first, then solver-only models)."""
        return list(dict.fromkeys([*self.authors, *self.solvers]))

    @property
    def both(self) -> list[str]:
        """Models with both roles: the only ones duels, Bradley-Terry and role separation can compare."""
        solvers = set(self.solvers)
        return [a for a in self.authors if a in solvers]

    @property
    def author_partitions(self) -> list[str]:
        """The author side of the pair matrix: registry authors, then imports."""
        return [*self.authors, *self.imports]

    def pairs(self, round_: int = 0) -> list[tuple[str, str]]:
        """(author, solver) pairs of a round: imports exist in round 0 only (they are never hardened)."""
        authors = self.author_partitions if round_ == 0 else list(self.authors)
        return [(a, s) for a in authors for s in self.solvers]

    def pairs_involving(self, new: Newcomers, round_: int = 0) -> list[tuple[str, str]]:
        """The pairs of a round whose author newly authors or whose solver newly solves."""
        fresh_a, fresh_s = set(new.authors), set(new.solvers)
        return [(a, s) for a, s in self.pairs(round_) if a in fresh_a or s in fresh_s]

    def newcomers(self, registered_authors: Iterable[str], registered_solvers: Iterable[str]) -> Newcomers:
        """Models whose role has no partition yet: an author not on the author side, a solver not on the solver
        side. A model that gains a role later is a newcomer in that role only (it plays its new row or column)."""
        known_a, known_s = set(registered_authors), set(registered_solvers)
        return Newcomers(tuple(a for a in self.authors if a not in known_a),
                         tuple(s for s in self.solvers if s not in known_s))

    def still_wanted(self, authors: Iterable[str], pairs: Iterable[tuple[str, str]]
                     ) -> tuple[list[str], list[tuple[str, str]]]:
        """The stale authors and pairs the roles still ask for: a model that lost a role keeps its rows (nothing
        is deleted, as when a model leaves the registry) but is not re-run in that role."""
        from envduels_dagster.core.authoring.imports import is_import

        writers, players = set(self.authors), set(self.solvers)
        return ([a for a in authors if a in writers],
                [(a, s) for a, s in pairs if (a in writers or is_import(a)) and s in players])

    def pair_count(self, rounds: int = 0) -> int:
        return sum(len(self.pairs(r)) for r in range(rounds + 1))


def roster_from_table(rows: Iterable[tuple[str, object]], authors_seen: Iterable[str] = ()) -> Roster:
    """The roster of table ``model_registry``'s (name, roles) rows, ``roles`` as written there (``"author,solver"``;
    empty or missing: both), plus the imports among ``authors_seen`` (e.g. the authors of a mart)."""
    from envduels_dagster.core.authoring.imports import is_import

    named = [(str(n), r.split(",") if isinstance(r, str) and r else ["author", "solver"]) for n, r in rows]
    imports = sorted({str(a) for a in authors_seen if is_import(str(a))})
    return Roster(tuple(n for n, r in named if "author" in r), tuple(n for n, r in named if "solver" in r),
                  tuple(imports))


def ranking_scope(roster: Roster) -> dict[str, str]:
    """For each figure of ``rankings``, whether the roster can give it a meaning, and why not.

    Keys: ``author_ranking``, ``solver_ranking``, ``duels``, ``transitivity``, ``role_separation``. Values start
    with ``"meaningful"`` or ``"not meaningful"`` and say among which models, so the UI shows which
    rankings to read instead of a table of NaN or of a one-model "rank 1".
    """
    authors, solvers, both = roster.author_partitions, list(roster.solvers), roster.both

    def peers_of(models: Sequence[str], others: Sequence[str]) -> bool:
        """Every ranked model has someone on the other side who is not itself (self pairs are not peer pairs)."""
        return bool(models) and all(any(o != m for o in others) for m in models)

    def listed(models: Sequence[str]) -> str:
        return ", ".join(models) if models else "none"

    scope = {}
    if len(authors) < MIN_RANKED:
        scope["author_ranking"] = f"not meaningful: {len(authors)} author ({listed(authors)}); ranking needs {MIN_RANKED}"
    elif not peers_of(authors, solvers):
        scope["author_ranking"] = "not meaningful: no solver other than the author plays its environments"
    else:
        scope["author_ranking"] = (f"meaningful: among {len(authors)} authors ({listed(authors)}), by the lift their "
                                   f"environments give {listed(solvers)}")
    if len(solvers) < MIN_RANKED:
        scope["solver_ranking"] = (f"not meaningful: {len(solvers)} solver ({listed(solvers)}); its scores are given, "
                                   f"a ranking needs {MIN_RANKED}")
    elif not peers_of(solvers, authors):
        scope["solver_ranking"] = "not meaningful: no author other than the solver wrote environments for it"
    else:
        scope["solver_ranking"] = (f"meaningful: among {len(solvers)} solvers ({listed(solvers)}), on environments "
                                   f"by {listed(authors)}")
    why_not = (f"{len(both)} model(s) with both roles ({listed(both)}); a duel needs two models that each write "
               "and each play the other's environments")
    scope["duels"] = (f"meaningful: among {len(both)} models with both roles ({listed(both)})"
                      if len(both) >= MIN_DUEL else f"not meaningful: {why_not}")
    for key in ("transitivity", "role_separation"):
        scope[key] = (f"meaningful: among {len(both)} models with both roles ({listed(both)})"
                      if len(both) >= MIN_TRIADS else
                      f"not meaningful: {len(both)} model(s) with both roles ({listed(both)}); it needs {MIN_TRIADS}")
    return scope
