"""Adaptive seed sampling: stop playing an (environment, solver) once its verdict is settled.

Why: with fixed sampling every (environment, solver) costs ``len(benchmark_seeds)`` seeds
x 2 conditions, yet most outcomes are clear long before: a solver that passes an
environment cold on its first seed makes it *wasted* for that solver whatever the
other seeds say, and one that fails both conditions twice is almost surely *noise*.
The calls saved there are better spent on borderline environments, where four seeds
cannot tell whether a learner belongs in the training set.

The rule (no Dagster here; ``play_pair_adaptive`` is used by ``duel_episodes`` when
``DuelSettings.adaptive_sampling`` is on):

* Seeds are played in order, both conditions of a seed together (lift stays paired).
* After each seed the *verdict on the seeds played so far* is computed exactly as
  the pipeline computes it downstream: training membership (fails every cold seed:
  cold success rate <= ``max_cold``; passes at least ``min_hint`` of the hinted ones)
  and the DESIGN §6 category (wasted / noise / learnable).
* The verdict is *settled* when the predictive probability that the fixed design
  (``base_seeds`` seeds) would reach the same verdict is at least ``confidence``.
  Predictions use Beta-binomial posteriors of the cold and hinted success rates with
  Beta priors (``prior_cold``, ``prior_hint``). A cold success settles "wasted, not a
  member" outright when ``max_cold`` is 0.
* After ``base_seeds`` seeds, a pair that passes the cold criterion but whose hinted
  criterion is still unsettled over ``max_seeds`` seeds (e.g. cold 0/4 and hinted 2/4,
  right at the threshold) earns extra seeds, up to ``max_seeds``; the verdict is then
  taken on all seeds played.

What is settled is chosen by ``target``: ``"membership"`` (training-set membership, the
product's decision; the default) or ``"category"`` (membership and the category).
Whatever stops early is never contradicted by the data actually played: the
downstream statistics (p_cold, p_hint, category, training set) computed from the
played seeds give exactly the verdict the policy settled on.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

from envduels_dagster.core.stats.rules import category, is_member

if TYPE_CHECKING:
    from envduels_dagster.core.models.types import ChatGateway
    from envduels_dagster.core.play.episode import PlayConfig

@dataclass(frozen=True)
class AdaptivePolicy:
    confidence: float = 0.9
    min_seeds: int = 1
    base_seeds: int = 4  # the fixed design being replaced (len(benchmark_seeds) by default)
    max_seeds: int = 8  # cap for borderline (environment, solver) pairs
    prior_cold: tuple[float, float] = (0.5, 0.5)  # Beta(a, b) prior on the cold success rate
    prior_hint: tuple[float, float] = (0.5, 0.5)  # Beta(a, b) prior on the hinted success rate
    max_cold: float = 0.0  # training rule: cold success rate <= max_cold ...
    min_hint: float = 0.5  # ... and hinted success rate >= min_hint
    target: Literal["membership", "category"] = "membership"

    def __post_init__(self) -> None:
        if not 0.5 <= self.confidence < 1.0:
            raise ValueError("confidence must be in [0.5, 1)")
        if not 1 <= self.min_seeds <= self.base_seeds <= self.max_seeds:
            raise ValueError("need 1 <= min_seeds <= base_seeds <= max_seeds")
        if self.target not in ("membership", "category"):
            raise ValueError("target must be 'membership' or 'category'")


def verdict(cold: int, hint: int, n: int, policy: AdaptivePolicy) -> tuple:
    member = is_member(cold, hint, n, policy.max_cold, policy.min_hint)
    return (member,) if policy.target == "membership" else (member, category(cold, hint))


@lru_cache(maxsize=65536)
def _beta_binomial(r: int, a: float, b: float) -> tuple[float, ...]:
    """P(X = x) for x = 0..r, X ~ BetaBinomial(r, a, b)."""
    log_beta = lambda x, y: math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)  # noqa: E731
    base = log_beta(a, b)
    return tuple(math.comb(r, x) * math.exp(log_beta(a + x, b + r - x) - base) for x in range(r + 1))


def settled_probability(cold: int, hint: int, n: int, horizon: int, policy: AdaptivePolicy) -> float:
    """P(the verdict on ``horizon`` seeds equals the verdict on the ``n`` played so far | data)."""
    r = horizon - n
    if r <= 0:
        return 1.0
    now = verdict(cold, hint, n, policy)
    pc = _beta_binomial(r, policy.prior_cold[0] + cold, policy.prior_cold[1] + n - cold)
    ph = _beta_binomial(r, policy.prior_hint[0] + hint, policy.prior_hint[1] + n - hint)
    return sum(pc[x] * ph[y] for x in range(r + 1) for y in range(r + 1)
               if verdict(cold + x, hint + y, horizon, policy) == now)


def hint_settled_probability(hint: int, n: int, horizon: int, policy: AdaptivePolicy) -> float:
    """P(the hinted criterion (rate >= min_hint) on ``horizon`` seeds agrees with the one on ``n`` | data)."""
    r = horizon - n
    if r <= 0:
        return 1.0
    now = hint / n >= policy.min_hint - 1e-12 if n else False
    ph = _beta_binomial(r, policy.prior_hint[0] + hint, policy.prior_hint[1] + n - hint)
    return sum(ph[y] for y in range(r + 1) if ((hint + y) / horizon >= policy.min_hint - 1e-12) == now)


def next_step(cold: int, hint: int, n: int, policy: AdaptivePolicy) -> bool:
    """True: play another seed; False: the verdict is settled (or the cap is reached).

    Up to ``base_seeds``: continue while the verdict that ``base_seeds`` seeds would give is
    not settled. From there on (extra seeds): continue only while the *hinted* criterion is
    borderline over ``max_seeds``; the cold criterion ("fails every cold seed") is not a
    reason for extra seeds, since more seeds can only add cold successes and would bias
    membership against the environments the training set wants.
    """
    if n < policy.min_seeds:
        return True
    if n >= policy.max_seeds:
        return False
    if n < policy.base_seeds:
        return settled_probability(cold, hint, n, policy.base_seeds, policy) < policy.confidence
    if cold / n > policy.max_cold + 1e-12:
        return False  # fails the cold criterion already: not a member whatever the hinted seeds say
    return hint_settled_probability(hint, n, policy.max_seeds, policy) < policy.confidence


def extra_seeds(seeds: list[int], count: int) -> list[int]:
    """``seeds`` followed by new seeds (after the largest) up to ``count`` in all."""
    out = list(seeds)
    used = set(out)
    nxt = max(out, default=-1) + 1
    while len(out) < count:
        if nxt > 2**64 - 1:  # seeds are unsigned 64-bit (protocol.Seed): wrap to the smallest unused
            nxt = 0
        if nxt not in used:
            out.append(nxt)
            used.add(nxt)
        nxt += 1
    return out


@dataclass
class PairDecision:
    """What the policy did for one (environment, solver)."""

    env_id: str
    seeds_played: list[int] = field(default_factory=list)
    cold: int = 0
    hint: int = 0
    incomplete_seeds: int = 0
    member: bool = False
    category: str = "noise"

    @property
    def n(self) -> int:
        return len(self.seeds_played) - self.incomplete_seeds


async def play_env_adaptive(play_seed: Callable, seeds: list[int], policy: AdaptivePolicy, env_id: str = "",
                            ) -> tuple[list, PairDecision]:
    """Play ``seeds`` in order with ``play_seed(seed) -> (cold_record, hinted_record)`` until settled.

    A seed where either condition is incomplete counts for nothing (as downstream), and the
    next seed is played instead; at most ``max_seeds`` seeds are tried in all.
    """
    seeds = extra_seeds(seeds, policy.max_seeds)
    decision, records = PairDecision(env_id), []
    for seed in seeds:
        if not next_step(decision.cold, decision.hint, decision.n, policy):
            break
        committed = decision.n < policy.min_seeds  # played whatever the outcomes so far: unbiased
        cold_rec, hint_rec = await play_seed(seed)
        if not committed:  # a copy: the caller's records may be shared (memoized episodes)
            cold_rec, hint_rec = (r.model_copy(update={"sampling": "adaptive"}) for r in (cold_rec, hint_rec))
        records += [cold_rec, hint_rec]
        decision.seeds_played.append(seed)
        if cold_rec.status == "incomplete" or hint_rec.status == "incomplete":
            decision.incomplete_seeds += 1
            continue
        decision.cold += cold_rec.status == "success"
        decision.hint += hint_rec.status == "success"
    decision.member = is_member(decision.cold, decision.hint, decision.n, policy.max_cold, policy.min_hint)
    decision.category = category(decision.cold, decision.hint)
    return records, decision


async def play_pair_adaptive(gateway: ChatGateway, solver: str, envs, policy: AdaptivePolicy,
                             config: PlayConfig | None = None) -> tuple[list, list[PairDecision]]:
    """``play_pair`` with adaptive seeds: every valid environment runs its own sequence of seeds.

    Environments run side by side (at most ``config.concurrency`` episodes in flight); within an
    environment the two conditions of a seed run together and seeds run one after another,
    since whether to play the next depends on this one. Records come back grouped by
    environment, seeds in order, cold before hinted. ``config``: as in ``play_pair`` (its ``on_progress``
    hears of every episode, with total -1: how many the policy plays is known only at the end).
    """
    from envduels_dagster.core.concurrency.gather import gather_or_cancel
    from envduels_dagster.core.play.episode import DEFAULT_PLAY, episode_runner

    valid = [env for env in envs if env.valid]
    episode = episode_runner(gateway, solver, config or DEFAULT_PLAY, -1)

    async def one_env(env):
        async def play_seed(seed):
            return await asyncio.gather(*(episode(env, seed, c) for c in ("cold", "hinted")))

        return await _one_env(env, play_seed)

    async def _one_env(env, play_seed):
        seeds = list(env.benchmark_seeds)
        base = max(1, len(seeds))  # the fixed design this environment would get
        mine = replace(policy, base_seeds=base, max_seeds=max(policy.max_seeds, base),
                       min_seeds=min(policy.min_seeds, base))
        return await play_env_adaptive(play_seed, seeds, mine, env.env_id)

    results = await gather_or_cancel(one_env(env) for env in valid)
    records = [rec for recs, _ in results for rec in recs]
    return records, [decision for _, decision in results]
