"""A pilot before a paid run: the run's own round-0 authoring and a slice of its play, to measure what a plan
made from defaults cannot know (``envduels plan --pilot``).

Why the run's own environments and not a small separate experiment: the earlier documented pilot (3
environments x 2 seeds) wrote other environments than the run (its brief asks for 3, not 10), so its turns
per episode missed the run's by 36-64% (docs/BENCHMARKS.md "Plan against actual"), and every call it made
was spent on nothing the run reused. Here the authoring calls are the run's own (same author, count, seeds
and authoring plan, so the same prompts): the run's authoring is then answered from the call cache. The
pilot's episodes are the run's episodes of its first seed on a few environments of each pair (same
environment, seed and condition, so the same calls): the run replays them from the cache too. What the
pilot pays is therefore part of the run's bill, paid early, not an extra.

What it measures: the environments (how many validate, each one's ``max_turns``: what sets episode length
on the author's side), per solver its ``turn_fill`` (calls / max_turns: what its skill sets) and its
prompt tokens turn by turn (``core/requests/turns.py``), and each model's call times (``latency.py``). ``plan_experiment`` then plans every episode from those
(``core/requests/plan.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from envduels_dagster.core.authoring.plan import AuthoringPlan
    from envduels_dagster.core.sandbox import SandboxLimits

PILOT_EPISODES = 32  # episodes per solver the pilot plays (pooled over its authors), enough to measure turn_fill
PILOT_SEEDS = 1  # the run's first seeds the pilot plays, cold and hinted


@dataclass(frozen=True)
class PilotResult:
    envs_per_pair: int
    episodes: int
    paid_calls: int  # calls that reached a provider (cache misses): what the pilot paid
    cached_calls: int


@dataclass(frozen=True)
class PilotConfig:
    """The run the pilot measures, as the run will make its calls (its ``authors`` and ``pairs``,
    ``envs_per_author`` environments each on the benchmark ``seeds`` with the run's ``authoring_plan``: the same
    prompts, so the run finds them in the call cache), and how the pilot plays its slice of it (sandbox
    ``limits``, episodes at once, about ``episodes_per_solver`` episodes per solver)."""

    authors: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...]
    envs_per_author: int
    seeds: tuple[int, ...]
    authoring_plan: AuthoringPlan | None = None  # None: the default plan
    limits: SandboxLimits | None = None
    concurrency: int = 8
    episodes_per_solver: int = PILOT_EPISODES


def envs_per_pair(n_authors: int, episodes_per_solver: int = PILOT_EPISODES, conditions: int = 2) -> int:
    """Environments of each pair the pilot plays so that each solver plays about ``episodes_per_solver``."""
    return max(1, math.ceil(episodes_per_solver / max(1, n_authors * conditions * PILOT_SEEDS)))


async def run_pilot(gateway, config: PilotConfig, conn, on_progress=None) -> PilotResult:
    """Author every author's round 0 as the run will, play ``envs_per_pair`` spread environments x the first
    seed x both conditions of every pair, and store both in ``conn`` (a warehouse of its own: the pilot's
    partial pairs must not stand for the run's). Every author writes at once, then every pair plays at once,
    within each provider's ``max_in_flight`` and rate limits (the gateway enforces them); the first failure
    cancels the rest (``gather_or_cancel``)."""
    from envduels_dagster.core.authoring.prompts import author_environments
    from envduels_dagster.core.concurrency.gather import gather_or_cancel
    from envduels_dagster.core.play.episode import PlayConfig, play_pair
    from envduels_dagster.core.play.pair import Slots, provider_slots
    from envduels_dagster.core.requests.latency import TimedGateway
    from envduels_dagster.core.requests.plan import spread
    from envduels_dagster.core.storage.warehouse import environments_frame, episodes_frame, replace_rows

    authors, pairs, limits = config.authors, config.pairs, config.limits
    now = datetime.now()
    n = envs_per_pair(len(authors), config.episodes_per_solver)
    gateway = TimedGateway(gateway)  # each paid call's time, kept for the plan's hours (core/requests/latency.py)
    envs = {}

    async def author(name: str) -> None:  # every author at once: one author's wall time, not the sum
        envs[name] = await author_environments(gateway, name, config.envs_per_author, list(config.seeds), limits,
                                               plan=config.authoring_plan)
        replace_rows(conn, "environments", environments_frame(envs[name], "pilot", now), {"author": name})
        if on_progress is not None:
            on_progress(f"{name}: {sum(e.valid for e in envs[name])} of {len(envs[name])} environments valid")

    await gather_or_cancel(author(a) for a in authors)
    gateway.stage = "play"
    # every pair at once, as a ranged pair run plays them (assets/duels/assets.py): each episode holds one of
    # its solver provider's slots while it plays, and the gateway's pool caps the calls in flight
    registry = getattr(gateway, "registry", None)
    slots = ({p: Slots(k) for p, k in provider_slots(registry, [s for _, s in pairs]).items()}
             if registry is not None else {})
    episodes = 0

    async def pair(author: str, solver: str) -> None:
        nonlocal episodes
        valid = [e for e in envs[author] if e.valid]
        chosen = [valid[i].model_copy(update={"benchmark_seeds": list(valid[i].benchmark_seeds[:PILOT_SEEDS])})
                  for i in spread([e.max_turns for e in valid], n)]
        gate = slots.get(registry.get(solver).provider) if registry is not None else None
        records = await play_pair(gateway, solver, chosen, PlayConfig(
            limits=limits, concurrency=config.concurrency, slot=gate.one if gate is not None else None))
        df = episodes_frame(records, {e.env_id: e.max_turns for e in chosen}, "pilot", now)
        replace_rows(conn, "episodes", df, {"author": author, "solver": solver})
        episodes += len(records)
        if on_progress is not None:
            on_progress(f"{author} x {solver}: {len(records)} episodes")

    await gather_or_cancel(pair(a, s) for a, s in pairs)
    gateway.store(conn)
    return PilotResult(n, episodes, sum(gateway.stats.backend_calls.values()),
                       sum(gateway.stats.cache_hits.values()))
