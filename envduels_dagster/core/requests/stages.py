"""Requests: what a registry change or a stale partition asks the pipeline to run, as ordered stages.

Why stages instead of one burst of runs: a pair can only be played once its author's environments
exist, round r+1 only once round r's pairs are played, and the marts, rankings and training sets are
only right once *every* partition of the request has landed. Launching everything at once (and making
pair runs wait for their author inside a run slot) refreshed the marts after the first pair of a
request and again after later ones, some of them on half-written data. Here a request is a list of
stages; the orchestrator launches stage k+1 only when every run of stage k succeeded, and the
downstream refresh is the last stage, so it runs once per request. A failed stage stops the request:
nothing downstream is refreshed from data that would be wrong.

Pure functions and plain data (no Dagster): the sensor turns :class:`Stage` into run requests and run
statuses into :class:`StageStatus`; everything that decides *what* and *when* lives here and is tested
without an instance.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from envduels_dagster.core.requests.roster import Newcomers, Roster

StageKind = Literal["authors", "pairs", "downstream", "learners", "studies"]
Partition = str  # a model name, or "author|solver" for a pair (Dagster's multi-partition key order)

# Panel modes for co-evolution rounds when a model joins (README "Adding, removing, bumping a model"):
# frozen: existing authors' round>=1 environments stay as written (their digests did not include the
#         newcomer's play); live: those rounds become stale and are re-hardened with the full panel.
PANEL_MODES = ("frozen", "live")


def pair_partition(author: str, solver: str) -> Partition:
    return f"{author}|{solver}"


@dataclasses.dataclass(frozen=True)
class Stage:
    kind: StageKind
    round: int | None
    partitions: tuple[Partition, ...] = ()

    @property
    def label(self) -> str:
        where = f" round {self.round}" if self.round is not None else ""
        count = f" ({len(self.partitions)} partitions)" if self.partitions else ""
        return f"{self.kind}{where}{count}"


@dataclasses.dataclass(frozen=True)
class RequestPlan:
    """An ordered list of stages with an id (unique per request) and a human-readable reason."""

    request_id: str
    reason: str
    stages: tuple[Stage, ...]

    def to_json(self) -> str:
        return json.dumps({"id": self.request_id, "reason": self.reason,
                           "stages": [[s.kind, s.round, list(s.partitions)] for s in self.stages]},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> RequestPlan:
        raw = json.loads(text)
        return cls(raw["id"], raw["reason"], tuple(Stage(k, r, tuple(p)) for k, r, p in raw["stages"]))

    @property
    def model_partitions(self) -> int:
        return sum(len(s.partitions) for s in self.stages if s.kind in ("authors", "pairs"))


def _tail(learners: Sequence[str], studies: bool) -> list[Stage]:
    """The downstream refresh, once per request: marts and rankings, then every learner, then studies."""
    tail = [Stage("downstream", None), Stage("learners", None, tuple(learners))]
    return tail + ([Stage("studies", None)] if studies else [])


def plan_new_models(request_id: str, new: Sequence[str], models: Sequence[str], rounds: int,
                    panel_mode: str = "frozen", studies: bool = True, imported: Sequence[str] = ()) -> RequestPlan:
    """Every configured round for the newcomers, in order, then one downstream refresh.

    Round r: the newcomers author (round 0) or harden (r >= 1) their environments, then every pair
    involving a newcomer is played. With ``panel_mode="live"`` the other authors' rounds >= 1 are
    re-hardened too (their digests were written without the newcomers' play) and all their round-r
    pairs replayed; with ``"frozen"`` they are kept as written. ``imported`` authors (``import:<name>``,
    no model) have round-0 environments only: each newcomer plays them in round 0 as a solver.
    """
    unknown = set(new) - set(models)
    if unknown:
        raise ValueError(f"new models {sorted(unknown)} are not in the registry's models {list(models)}")
    from envduels_dagster.core.requests.roster import Newcomers, Roster

    return plan_newcomers(request_id, Roster.everyone(models, imported), Newcomers(tuple(new), tuple(new)), rounds,
                          panel_mode, studies)


def plan_newcomers(request_id: str, roster: Roster, new: Newcomers, rounds: int, panel_mode: str = "frozen",
                   studies: bool = True) -> RequestPlan:
    """:func:`plan_new_models` with roles (``core/requests/roster.py``): the ``roster``'s authors write, its
    solvers play, its imports are round-0 authors without a model; ``new``: who newly authors and who newly solves.

    Round r: the new authors author (round 0) or harden (r >= 1), then the round's pairs whose author is new
    or whose solver is new are played: a new author-only model plays its row, a new learner its column (and
    every import's environments, in round 0). ``"live"`` re-hardens every author from round 1 and replays
    every author x solver pair there. Stages with nothing to run are left out; learners are the solvers.
    """
    authors, solvers, imported = roster.authors, roster.solvers, roster.imports
    new_authors, new_solvers = new.authors, new.solvers
    if panel_mode not in PANEL_MODES:
        raise ValueError(f"panel mode {panel_mode!r} is not one of {PANEL_MODES}")
    for kind, fresh_list, known in (("authors", new_authors, authors), ("solvers", new_solvers, solvers)):
        if unknown := set(fresh_list) - set(known):
            raise ValueError(f"new {kind} {sorted(unknown)} are not among the registry's {kind} {list(known)}")
    fresh_a, fresh_s = set(new_authors), set(new_solvers)
    stages: list[Stage] = []
    for r in range(rounds + 1):
        live = r > 0 and panel_mode == "live"
        writing = tuple(authors) if live else tuple(new_authors)
        played = tuple(pair_partition(a, s) for a in authors for s in solvers
                       if live or a in fresh_a or s in fresh_s)
        played += tuple(pair_partition(a, s) for a in imported for s in new_solvers) if r == 0 else ()
        stages += [Stage("authors", r, writing)] if writing else []
        stages += [Stage("pairs", r, played)] if played else []
    news = list(dict.fromkeys([*new_authors, *new_solvers]))
    roles = "" if list(new_authors) == list(new_solvers) else \
        f"; authors {', '.join(new_authors) or 'none'}, solvers {', '.join(new_solvers) or 'none'}"
    reason = f"new models {', '.join(news)} ({panel_mode} panel{roles})"
    return RequestPlan(request_id, reason, tuple(stages + _tail(solvers, studies)))


def plan_stale(request_id: str, stale_authors: Iterable[str], stale_pairs: Iterable[tuple[str, str]],
               models: Sequence[str], rounds: int, studies: bool = True) -> RequestPlan | None:
    """Re-author stale authors and replay stale pairs in round 0, and carry the change through the rounds.

    A re-authored model's later rounds descend from new parents, so they are redone too (its round-r
    hardening and its round-r pairs as author); a stale pair's solver changed, so its later-round
    counterparts are replayed. An imported author's pairs (``import:<name>``) exist in round 0 only.
    None when nothing is stale.
    """
    from envduels_dagster.core.authoring.imports import is_import

    authors = sorted(set(stale_authors))
    pairs = sorted(set(stale_pairs) | {(a, s) for a in authors for s in models})
    if not authors and not pairs:
        return None
    stages: list[Stage] = []
    for r in range(rounds + 1):
        if authors:
            stages.append(Stage("authors", r, tuple(authors)))
        if played := tuple(pair_partition(a, s) for a, s in pairs if r == 0 or not is_import(a)):
            stages.append(Stage("pairs", r, played))
    reason = f"stale: {len(authors)} authors, {len(pairs)} pairs"
    return RequestPlan(request_id, reason, tuple(stages + _tail(models, studies)))


def plan_import(request_id: str, author: str, models: Sequence[str], studies: bool = True) -> RequestPlan:
    """An imported export landed (``authored_environments[import:<name>]``): every registry model plays it.

    Only round 0 and only as author: an import has no model, so it neither solves nor hardens; its pairs
    are ``author x model`` for every registry model, then the downstream refresh.
    """
    return RequestPlan(request_id, f"import {author}",
                       (Stage("pairs", 0, tuple(pair_partition(author, s) for s in models)), *_tail(models, studies)))


def plan_refresh(request_id: str, models: Sequence[str], why: str, studies: bool = True) -> RequestPlan:
    """Only the downstream refresh: partitions landed outside any request (e.g. run by hand in the UI)."""
    return RequestPlan(request_id, f"refresh: {why}", tuple(_tail(models, studies)))


class StageStatus(enum.Enum):
    NOT_LAUNCHED = "not_launched"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


def stage_status(expected: Sequence[Partition], latest_status_by_partition: Mapping[Partition, str],
                 unpartitioned: bool = False) -> StageStatus:
    """Fold the *latest* run of each partition (a retry replaces its parent) into one status.

    Statuses are Dagster run status names (``SUCCESS``, ``FAILURE``, ``CANCELED``, anything else is in
    progress). An unpartitioned stage has one run, keyed ``""``.
    """
    keys = [""] if unpartitioned else list(expected)
    seen = [latest_status_by_partition.get(k) for k in keys]
    if all(s is None for s in seen):
        return StageStatus.NOT_LAUNCHED
    if any(s in ("FAILURE", "CANCELED") for s in seen):
        return StageStatus.FAILED
    if all(s == "SUCCESS" for s in seen):
        return StageStatus.SUCCEEDED
    return StageStatus.RUNNING


@dataclasses.dataclass(frozen=True)
class Decision:
    action: Literal["launch", "wait", "failed", "done"]
    stage: int | None = None
    message: str = ""


def next_step(plan: RequestPlan, statuses: Sequence[StageStatus]) -> Decision:
    """What to do with a request given each stage's status (in plan order)."""
    if len(statuses) != len(plan.stages):
        raise ValueError(f"{len(statuses)} statuses for {len(plan.stages)} stages of request {plan.request_id}")
    for i, (stage, status) in enumerate(zip(plan.stages, statuses)):
        if status is StageStatus.SUCCEEDED:
            continue
        if status is StageStatus.FAILED:
            return Decision("failed", i, f"{plan.reason}: stage {i + 1}/{len(plan.stages)} ({stage.label}) failed; "
                                         "nothing downstream of it was refreshed. Re-run the failed runs from the UI "
                                         "(or fix the cause): the request resumes when they succeed.")
        if status is StageStatus.RUNNING:
            return Decision("wait", i, f"{plan.reason}: waiting for stage {i + 1}/{len(plan.stages)} ({stage.label})")
        return Decision("launch", i, f"{plan.reason}: launching stage {i + 1}/{len(plan.stages)} ({stage.label})")
    return Decision("done", None, f"{plan.reason}: all {len(plan.stages)} stages succeeded")


@dataclasses.dataclass
class RequestBook:
    """The orchestrator's memory (a sensor cursor): open requests, recently finished ids, what was seen."""

    open: dict[str, str] = dataclasses.field(default_factory=dict)  # request id -> plan JSON
    finished: list[str] = dataclasses.field(default_factory=list)  # newest last, bounded
    last_stale_check: float = 0.0
    refreshed_through: float = 0.0  # newest pair materialization the last downstream refresh covered
    imports: dict[str, float] = dataclasses.field(default_factory=dict)  # import partition -> landing planned
    counter: int = 0

    KEEP_FINISHED = 200

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> RequestBook:
        if not text:
            return cls()
        raw = json.loads(text)
        if not isinstance(raw, dict) or "open" not in raw:  # a cursor from before requests existed
            return cls()
        return cls(**{f.name: raw[f.name] for f in dataclasses.fields(cls) if f.name in raw})

    def new_id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.counter}"

    def add(self, plan: RequestPlan) -> None:
        self.open[plan.request_id] = plan.to_json()

    def finish(self, request_id: str) -> None:
        self.open.pop(request_id, None)
        self.finished = [*self.finished, request_id][-self.KEEP_FINISHED:]

    def plans(self) -> list[RequestPlan]:
        return [RequestPlan.from_json(v) for v in self.open.values()]

    def busy_partitions(self) -> set[Partition]:
        """Model and pair partitions some open request will still run."""
        return {p for plan in self.plans() for s in plan.stages for p in s.partitions}
