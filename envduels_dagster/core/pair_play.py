"""Playing one (author, solver) pair: which environments, fixed or adaptive seeds, and when to give up.

Why here: the choices a pair run makes (are the stored environments the registry's
current version, fixed seeds or adaptive sampling, and refusing to record a pair whose
every model call failed) are the pipeline's policy; they must not depend on Dagster, so
they are tested on plain records. Both ``duel_episodes`` and every round's pair asset
call :func:`play_pair_with`.
"""

from __future__ import annotations

from collections.abc import Callable
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
