"""Batches of pair partitions for one run: rectangles of (author range) x (solver range).

Why rectangles: Dagster 1.13 runs a range of a two-dimensional partitions definition as the product
of its two dimension ranges (``MultiPartitionsDefinition.get_partition_keys_in_range``): the run tagged
``a1|s1`` .. ``a2|s2`` covers every author from a1 to a2 (in the author dimension's order) with every
solver from s1 to s2. A batch is therefore an author interval x a solver interval whose every cell
the stage asked for. A newcomer's pairs make two rectangles (its row and its column), a full build one
per solver provider, so a stage takes a handful of runs instead of one per pair.

Why grouped by provider: a pair calls its solver; the per-provider run limit in ``dagster.yaml`` acts
on the run's provider tag, so a run whose solvers share one provider keeps the limit meaningful.

Pure functions (no Dagster): the sensor turns a :class:`Batch` into a ranged run request.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence

DEFAULT_MAX_PAIRS_PER_RUN = 100  # docs/DECISIONS.md "Batched pair runs": measured in docs/BENCHMARKS.md
DEFAULT_PARALLEL_RUNS = 2  # runs of one stage worth running at once: 2 cores, 2 runs per provider


@dataclasses.dataclass(frozen=True)
class Batch:
    """Authors ``authors[0]..authors[-1]`` x solvers ``solvers[0]..solvers[-1]``, contiguous in dimension order."""

    authors: tuple[str, ...]
    solvers: tuple[str, ...]
    group: str | None = None  # the solvers' provider, when grouped

    @property
    def start(self) -> str:
        return f"{self.authors[0]}|{self.solvers[0]}"

    @property
    def end(self) -> str:
        return f"{self.authors[-1]}|{self.solvers[-1]}"

    @property
    def pairs(self) -> list[str]:
        return [f"{a}|{s}" for a in self.authors for s in self.solvers]

    def __len__(self) -> int:
        return len(self.authors) * len(self.solvers)


def range_members(start: str, end: str, order: Sequence[str]) -> list[str]:
    """The keys from ``start`` to ``end`` inclusive in ``order`` (Dagster's range of one dimension)."""
    try:
        i, j = order.index(start), order.index(end)
    except ValueError:
        return []
    return list(order[i:j + 1])


def pairs_in_range(start: str, end: str, authors_order: Sequence[str], solvers_order: Sequence[str]) -> list[str]:
    """The pair partitions a ranged run tagged ``start``..``end`` ("author|solver") covers."""
    (a0, s0), (a1, s1) = start.split("|", 1), end.split("|", 1)
    return [f"{a}|{s}" for a in range_members(a0, a1, authors_order) for s in range_members(s0, s1, solvers_order)]


def _runs(indices: Iterable[int]) -> list[tuple[int, int]]:
    """Maximal runs of consecutive integers, as (first, last)."""
    out: list[tuple[int, int]] = []
    for i in sorted(set(indices)):
        if out and i == out[-1][1] + 1:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out


def _split(n: int, pieces: int) -> list[tuple[int, int]]:
    """``range(n)`` cut into ``pieces`` near-equal consecutive slices, as (start, stop)."""
    pieces = max(1, min(n, pieces))
    bounds = [round(k * n / pieces) for k in range(pieces + 1)]
    return [(bounds[k], bounds[k + 1]) for k in range(pieces) if bounds[k + 1] > bounds[k]]


def _chunk(authors: Sequence[str], solvers: Sequence[str], size: int, group: str | None) -> list[Batch]:
    """A rectangle cut into batches of at most ``size`` cells: whole rows when they fit, else row pieces."""
    rows, cols = len(authors), len(solvers)
    if cols >= size:
        col_slices = _split(cols, math.ceil(cols / size))
        return [Batch((a,), tuple(solvers[c0:c1]), group) for a in authors for c0, c1 in col_slices]
    per = max(1, size // cols)
    return [Batch(tuple(authors[r0:r1]), tuple(solvers), group) for r0, r1 in _split(rows, math.ceil(rows / per))]


def pair_batches(pairs: Iterable[str], authors_order: Sequence[str], solvers_order: Sequence[str],
                 max_per_run: int = DEFAULT_MAX_PAIRS_PER_RUN, parallel: int = DEFAULT_PARALLEL_RUNS,
                 group_of: Callable[[str], str | None] | Mapping[str, str | None] | None = None) -> list[Batch]:
    """Cover ``pairs`` ("author|solver") exactly with ranged batches of at most ``max_per_run`` pairs.

    Batches are no larger than ``len(pairs) / parallel`` (rounded up) so a small stage still keeps
    ``parallel`` runs busy. Pairs whose author or solver is not in the dimension orders (not yet
    registered as partitions) come back as single-pair batches, as today.
    """
    wanted = list(dict.fromkeys(pairs))
    if not wanted:
        return []
    group = (group_of.get if isinstance(group_of, Mapping) else group_of) or (lambda _s: None)
    a_index = {a: i for i, a in enumerate(authors_order)}
    s_index = {s: i for i, s in enumerate(solvers_order)}
    size = max(1, min(max_per_run, math.ceil(len(wanted) / max(1, parallel))))
    out: list[Batch] = []
    cells: dict[str | None, dict[int, set[int]]] = {}
    for p in wanted:
        a, s = p.split("|", 1)
        if a not in a_index or s not in s_index:
            out.append(Batch((a,), (s,), group(s)))
            continue
        cells.setdefault(group(s), {}).setdefault(a_index[a], set()).add(s_index[s])
    for g, rows in cells.items():
        # solver intervals per author row, then consecutive authors with the same interval merged
        open_: dict[tuple[int, int], tuple[int, int]] = {}  # solver interval -> (first author, last author)
        rects: list[tuple[tuple[int, int], tuple[int, int]]] = []
        for ai in sorted(rows):
            intervals = set(_runs(rows[ai]))
            for iv, (a0, a1) in list(open_.items()):
                if iv not in intervals or a1 != ai - 1:
                    rects.append(((a0, a1), iv))
                    del open_[iv]
            for iv in intervals:
                a0, _ = open_.get(iv, (ai, ai))
                open_[iv] = (a0, ai)
        rects += [((a0, a1), iv) for iv, (a0, a1) in open_.items()]
        for (a0, a1), (s0, s1) in sorted(rects):
            out += _chunk(authors_order[a0:a1 + 1], solvers_order[s0:s1 + 1], size, g)
    return out
