"""Playing one (author, solver) pair: which environments, fixed or adaptive seeds, and when to give up.

Why here: the choices a pair run makes (are the stored environments the registry's
current version, fixed seeds or adaptive sampling, and refusing to record a pair whose
every model call failed) are the pipeline's policy; they must not depend on Dagster, so
they are tested on plain records. Both ``duel_episodes`` and every round's pair asset
call :func:`play_pair_with`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import pandas as pd

from envduels_dagster.core.adaptive import AdaptivePolicy, play_pair_adaptive
from envduels_dagster.core.episodes import play_pair


class AllCallsFailed(Exception):
    """Every episode of the pair ended with ``llm_error``: an infrastructure failure, never a solver result."""


@dataclass(frozen=True)
class PairOptions:
    concurrency: int = 8
    budget_s: float | None = None
    reuse_sandboxes: bool = False
    adaptive: AdaptivePolicy | None = None  # None: every benchmark seed of every valid environment


@dataclass
class PairPlay:
    records: list
    adaptive: dict = field(default_factory=dict)  # seeds played vs. fixed, when adaptive


def environments_current(env_rows: pd.DataFrame, author_version: str) -> bool:
    """True when stored environments exist and were all written by the registry's current author version."""
    return not env_rows.empty and set(env_rows["author_version"]) == {author_version}


def require_model_reached(records: list, author: str, solver: str) -> None:
    """Raise :class:`AllCallsFailed` when no episode of the pair reached the model (nothing may be written)."""
    failed = [r for r in records if r.stop_reason == "llm_error"]
    if records and len(failed) == len(records):
        raise AllCallsFailed(f"every episode of {author} x {solver} failed to reach the model; nothing was "
                             f"written. First error: {failed[0].error}")


async def play_pair_with(gateway, author: str, solver: str, envs: list, limits, options: PairOptions,
                         on_progress: Callable[[int, int], None] | None = None) -> PairPlay:
    """Play the pair with fixed or adaptive seeds as ``options`` say; raise AllCallsFailed if nothing reached it."""
    if options.adaptive is not None:
        records, decisions = await play_pair_adaptive(
            gateway, solver, envs, options.adaptive, limits, options.concurrency, options.budget_s,
            reuse_sandboxes=options.reuse_sandboxes)
        result = PairPlay(records, {"adaptive_seeds_played": sum(len(d.seeds_played) for d in decisions),
                                    "adaptive_seeds_fixed": sum(len(e.benchmark_seeds) for e in envs if e.valid)})
    else:
        result = PairPlay(await play_pair(gateway, solver, envs, limits, options.concurrency, on_progress,
                                          options.budget_s, reuse_sandboxes=options.reuse_sandboxes))
    require_model_reached(result.records, author, solver)
    return result


def pair_summary(df: pd.DataFrame) -> dict[str, float]:
    """Cold / hinted pass rates over completed episodes and the pair's lift, for the run's metadata."""
    from envduels_dagster.core.stats import pair_lift

    done = df[df["status"] != "incomplete"]
    rates = done.groupby("condition")["status"].apply(lambda s: (s == "success").mean()).to_dict()
    lift = pair_lift(df)
    return {"pass_rate_cold": float(rates.get("cold", 0.0)), "pass_rate_hinted": float(rates.get("hinted", 0.0)),
            "lift": float(lift["lift"].iloc[0]) if len(lift) else 0.0}


def in_flight_limit(entry) -> int:
    """Calls in flight a provider's pool allows across all pairs of a run: ``max_in_flight``, else ``max_concurrency``."""
    return entry.max_in_flight or entry.max_concurrency


def pairs_at_once(registry, solvers: Iterable[str], episode_concurrency: int, n_pairs: int) -> int:
    """How many pairs a run plays at once: enough to fill every solver provider's pool (issue 35).

    A pair keeps at most ``episode_concurrency`` episodes, so at most that many calls, in flight; a
    provider whose pool allows ``L`` calls (:func:`in_flight_limit`) is kept busy by ``ceil(L / c)``
    pairs. The pool itself (the gateway's, one per provider, shared by the run's pairs) caps the calls;
    this only bounds the sandbox workers and records held at once. One provider at the defaults
    (8 and 8): one pair at a time, as before.
    """
    limits: dict[str, int] = {}
    for name in set(solvers):
        entry = registry.get(name)
        limits[entry.provider] = max(limits.get(entry.provider, 0), in_flight_limit(entry))
    wanted = sum(math.ceil(limit / max(1, episode_concurrency)) for limit in limits.values())
    return max(1, min(n_pairs, wanted))
