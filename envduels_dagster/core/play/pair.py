"""Playing one (author, solver) pair: which environments, fixed or adaptive seeds, and when to give up.

Why here: the choices a pair run makes (are the stored environments the registry's
current version, fixed seeds or adaptive sampling, and refusing to record a pair whose
every model call failed) are the pipeline's policy; they must not depend on Dagster, so
they are tested on plain records. Both ``duel_episodes`` and every round's pair asset
call :func:`play_pair_with`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from envduels_dagster.core.play.adaptive import AdaptivePolicy, play_pair_adaptive
from envduels_dagster.core.play.episode import PlayConfig, play_pair


class AllCallsFailed(Exception):
    """Every episode of the pair ended with ``llm_error``: an infrastructure failure, never a solver result."""


@dataclass(frozen=True)
class PairOptions(PlayConfig):
    """How a pair is played: the play config its episodes get, and fixed or adaptive seeds."""

    adaptive: AdaptivePolicy | None = None  # None: every benchmark seed of every valid environment


@dataclass
class PairPlay:
    records: list
    adaptive: dict = field(default_factory=dict)  # seeds played vs. fixed, when adaptive


def environments_current(env_rows: pd.DataFrame, author_version: str) -> bool:
    """True when stored environments exist and were all written by the registry's current author version."""
    return not env_rows.empty and set(env_rows["author_version"]) == {author_version}


class StoppedAtBudget(Exception):
    """A spending cap (core/models/budget.py) stopped the pair before any episode finished: nothing is written."""


def require_model_reached(records: list, author: str, solver: str) -> None:
    """Raise :class:`StoppedAtBudget` when a cap stopped the pair before any episode finished, and
    :class:`AllCallsFailed` when no episode of the pair reached the model (nothing may be written)."""
    stopped = [r for r in records if r.stop_reason == "stopped_at_budget"]
    if stopped and all(r.stop_reason in ("stopped_at_budget", "llm_error") for r in records):
        raise StoppedAtBudget(f"{author} x {solver} stopped at budget before any episode finished; nothing was "
                              f"written. {stopped[0].error}")
    failed = [r for r in records if r.stop_reason == "llm_error"]
    if records and len(failed) == len(records):
        raise AllCallsFailed(f"every episode of {author} x {solver} failed to reach the model; nothing was "
                             f"written. First error: {failed[0].error}")


async def play_pair_with(gateway, author: str, solver: str, envs: list, options: PairOptions) -> PairPlay:
    """Play the pair with fixed or adaptive seeds as ``options`` say; raise AllCallsFailed if nothing reached it.

    ``options`` goes through whole to the player it picks (limits, budget, concurrency, each episode's ``slot``
    and ``on_progress``: before, this call unpacked it and the adaptive player lost ``on_progress``)."""
    if options.adaptive is not None:
        records, decisions = await play_pair_adaptive(gateway, solver, envs, options.adaptive, options)
        result = PairPlay(records, {"adaptive_seeds_played": sum(len(d.seeds_played) for d in decisions),
                                    "adaptive_seeds_fixed": sum(len(e.benchmark_seeds) for e in envs if e.valid)})
    else:
        result = PairPlay(await play_pair(gateway, solver, envs, options))
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


def provider_slots(registry, solvers: Iterable[str]) -> dict[str, int]:
    """Episode slots per solver provider for the pairs a run plays at once (issue 35): its pool's limit.

    Every episode in play holds one of its solver provider's slots (``Slots.one``), only while it plays,
    so the pairs in play together keep about as many calls in flight as the provider's pool allows
    (:func:`in_flight_limit`; the gateway's pool, one per provider, caps the calls themselves) and no
    more sandbox workers than that; a pair also plays at most ``episode_concurrency`` episodes at once.
    (Before, a pair held as many slots as it played episodes at once until its last episode ended: a pair
    of 4 episodes kept 4 slots while its longest episode played on alone, and about half stood idle.)
    """
    slots: dict[str, int] = {}
    for name in set(solvers):
        entry = registry.get(name)
        slots[entry.provider] = max(slots.get(entry.provider, 0), in_flight_limit(entry))
    return slots


class Slots:
    """A provider's ``total`` episode slots, shared by the pairs a run plays at once; an episode holds one
    while it plays (:meth:`one`). First come, first served, and a release wakes one waiter: with thousands of
    episodes waiting (8 a pair), waking them all on every release would cost their square."""

    def __init__(self, total: int):
        self.total = self.free = max(1, total)
        self._sem = asyncio.Semaphore(self.total)

    @contextlib.asynccontextmanager
    async def _held(self):
        async with self._sem:
            self.free -= 1
            try:
                yield
            finally:
                self.free += 1

    def one(self) -> contextlib.AbstractAsyncContextManager:
        """One slot: what each episode of a pair holds while it plays (``play_pair``'s ``slot``)."""
        return self._held()


def cut_replies(df: pd.DataFrame, solver: str) -> dict[str, int | str]:
    """Episodes ended by a reply cut at ``max_tokens`` (``stop_reason = length``), counted apart from solver
    outcomes, with what to do about them; and the reasoning tokens the pair's replies spent."""
    cut = int((df["stop_reason"] == "length").sum()) if len(df) else 0
    out: dict[str, int | str] = {"cut_at_max_tokens": cut,
                              "reasoning_tokens": int(df["reasoning_tokens"].sum()) if len(df) else 0}
    if cut:
        out["cut_at_max_tokens_advice"] = (f"{cut} episode(s) ended because a reply of {solver} was cut at "
                                           "max_tokens (incomplete, not failures): raise max_tokens for "
                                           f"{solver} in the registry")
    return out
