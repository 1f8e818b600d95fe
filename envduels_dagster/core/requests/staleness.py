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
    Models absent from ``versions`` (removed from the registry) are left alone. An imported author
    (``import:<name>``) has no registry version and keeps its export's seeds: it is never stale itself,
    but its pair with a solver whose version changed is.
    """
    from envduels_dagster.core.authoring.imports import is_import

    want_seeds = tuple(seeds)
    stale_authors = sorted(a for a, (vers, seed_sets) in author_state.items()
                           if a in versions and (vers != {versions[a]} or seed_sets != {want_seeds}))
    stale_pairs = sorted((a, s) for (a, s), (author_vers, solver_vers) in pair_state.items()
                         if s in versions and (
                             (a in versions and (a in stale_authors or author_vers != {versions[a]}
                                                 or solver_vers != {versions[s]}))
                             or (is_import(a) and solver_vers != {versions[s]})))
    return stale_authors, stale_pairs


def recorded_state(conn) -> tuple[dict[str, tuple[set[str], set[tuple[int, ...]]]],
                                  dict[tuple[str, str], tuple[set[str], set[str]]]]:
    """What the warehouse says each partition was made with: the inputs of :func:`stale_plan`.

    ``conn`` is a DuckDB connection to the warehouse (tables are created if absent, so a fresh
    warehouse reads as "nothing recorded").
    """
    from envduels_dagster.core.storage.warehouse import ensure_schema

    ensure_schema(conn)
    authors = conn.execute("""SELECT author, list(DISTINCT author_version), list(DISTINCT benchmark_seeds)
                              FROM environments WHERE round = 0 GROUP BY author""").fetchall()
    pairs = conn.execute("""SELECT p.author, p.solver, list(DISTINCT e.author_version),
                                   list(DISTINCT p.solver_version)
                            FROM episodes p JOIN environments e USING (env_id) GROUP BY ALL""").fetchall()
    author_state = {a: (set(v), {tuple(s) for s in seeds}) for a, v, seeds in authors}
    pair_state = {(a, s): (set(av), set(sv)) for a, s, av, sv in pairs}
    return author_state, pair_state


def stale_partitions(conn, versions: Mapping[str, str], seeds: list[int]) -> tuple[list[str], list[tuple[str, str]]]:
    """(stale authors, stale pairs) of the warehouse behind ``conn`` for the registry ``versions`` and ``seeds``."""
    author_state, pair_state = recorded_state(conn)
    return stale_plan(versions, list(seeds), author_state, pair_state)
