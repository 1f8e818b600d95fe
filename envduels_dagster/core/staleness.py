"""Which partitions a registry change makes new or stale. Pure functions, no Dagster.

Why here: the new-models sensor and the stale-partitions schedule must agree on
exactly which (author) and (author, solver) partitions to run, and tests must be
able to check that without a Dagster instance.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def new_model_plan(models: Iterable[str], registered: Iterable[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """For models not yet registered: their author partitions and every pair involving them.

    With N registered models and one new one that is 1 author partition and 2N+1 pairs.
    """
    models = list(models)
    known = set(registered)
    new = [m for m in models if m not in known]
    fresh = set(new)
    pairs = [(a, s) for a in models for s in models if a in fresh or s in fresh]
    return new, pairs


def stale_plan(versions: Mapping[str, str], seeds: list[int],
               author_state: Mapping[str, tuple[set[str], set[tuple[int, ...]]]],
               pair_state: Mapping[tuple[str, str], tuple[set[str], set[str]]]) -> tuple[list[str], list[tuple[str, str]]]:
    """Partitions whose stored data no longer matches the registry or the configured seeds.

    ``author_state[a]`` = (author versions, seed lists) found in the author's environments;
    ``pair_state[(a, s)]`` = (author versions of the played environments, solver versions) in its episodes.
    An author is stale when its version or seeds changed; a pair when its author or solver changed.
    Models absent from ``versions`` (removed from the registry) are left alone.
    """
    want_seeds = tuple(seeds)
    stale_authors = sorted(a for a, (vers, seed_sets) in author_state.items()
                           if a in versions and (vers != {versions[a]} or seed_sets != {want_seeds}))
    stale_pairs = sorted((a, s) for (a, s), (author_vers, solver_vers) in pair_state.items()
                         if a in versions and s in versions
                         and (a in stale_authors or author_vers != {versions[a]} or solver_vers != {versions[s]}))
    return stale_authors, stale_pairs
