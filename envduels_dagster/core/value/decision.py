"""When is "which author to pay" decided, and how much experiment does a decision need? Pure numpy, no Dagster.

Why: the answer (``author_value``) is a table of rates with intervals; a practitioner needs a decision ("pay X",
or "not yet: N more environments per author") and, before paying for a run, the size that can give one.

* ``p_best``: the probability that each author is the best for the learner, from the same replicates as
  ``author_value`` (``rate_replicates``; per dollar when costs are given, the slots' costs resampled).
* ``decide``: the sequential rule of ``envduels run --until-decided``: the leader is named when every author has
  at least ``min_envs`` environments and the leader's ``p_best`` reaches ``DECIDE_P_BEST`` (0.95) at a look (the
  run looks after every wave; the bar is above the single-look answer's 0.9 because repeated looks give chance
  more tries). Its false-decision rate on null tournaments and its power on planted ones are measured:
  ``benchmarks/sequential_decision.py``, docs/STATISTICS.md "Deciding which author to pay".
* ``envs_needed``: the environments per author one look needs to name the leader with ``p_best >= target``
  in ``power`` of runs, by simulation: future tournaments resample the measured P(learnable) of each author's
  slots (a pilot's or an earlier run's); calibrated by the same benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TARGET = 0.9
POWER = 0.8
MIN_ENVS = 4  # as core.value.author_value.MIN_ENVS: below it an author is "insufficient data"
MAX_ENVS = 512  # envs_needed above this: "not reachable at an affordable size" (equal rates need infinitely many)
DECIDE_P_BEST = 0.95  # the sequential rule's bar at every look (measured: docs/STATISTICS.md)
SIZE_FACTOR = 2  # the published size is twice the simulated one: measured, a pilot's simulated size reached the
# target in 0.54-0.63 of tournaments, twice it in 0.81 (goal 0.8; docs/STATISTICS.md "Deciding which author to pay")
SIZES = (4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)  # envs_needed searches these


@dataclass(frozen=True)
class Decision:
    decided: bool
    leader: str | None
    runner_up: str | None
    p_best: dict[str, float]
    n_envs: dict[str, int]
    threshold: float
    reason: str  # why decided or not, in words


def rate_replicates(p: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Replicates of an author's learnable rate per environment slot from its slots' P(learnable) ``p``: each
    replicate draws which slots are learnable (Bernoulli of each P), K of n, then the rate from its Jeffreys
    posterior Beta(K + 1/2, n - K + 1/2). Why not a plain bootstrap of the slots: with 4 slots all surely
    learnable every resample is 1.0 and the interval [1.0, 1.0], while a true rate of 0.7 gives 4 of 4 a quarter
    of the time; the Beta never collapses (coverage: docs/STATISTICS.md, "Author value")."""
    p = np.asarray(p, float)
    k = (rng.random((n_boot, p.size)) < p[None, :]).sum(axis=1)
    return rng.beta(k + 0.5, p.size - k + 0.5)


def p_best(groups: dict[str, np.ndarray], costs: dict[str, np.ndarray] | None = None, n_boot: int = 2000,
           seed: int = 0) -> dict[str, float]:
    """P(author is the best) per author: share of bootstrap replicates in which its rate is the highest.

    ``groups``: author -> P(learnable) of each environment slot it wrote (0 for a slot with no valid version);
    ``costs``: author -> the cost of each slot (rate per dollar then), else learnable per slot. Ties split."""
    rng = np.random.default_rng(seed)
    authors = sorted(groups)
    stats = []
    for a in authors:
        p = np.asarray(groups[a], float)
        if p.size == 0:
            stats.append(np.full(n_boot, -np.inf))
            continue
        rate = rate_replicates(p, n_boot, rng)
        if costs is None:
            stats.append(rate)
        else:
            c = np.asarray(costs[a], float)
            idx = rng.integers(0, p.size, size=(n_boot, p.size))
            stats.append(rate * p.size / c[idx].sum(axis=1))
    s = np.column_stack(stats)
    best = s == s.max(axis=1, keepdims=True)
    share = (best / best.sum(axis=1, keepdims=True)).mean(axis=0)
    return {a: float(v) for a, v in zip(authors, share)}


def decide(groups: dict[str, np.ndarray], costs: dict[str, np.ndarray] | None = None, *,
           bar: float = DECIDE_P_BEST, min_envs: int = MIN_ENVS, n_boot: int = 2000, seed: int = 0) -> Decision:
    """The leader and whether it is decided: every author has ``min_envs`` slots and the leader's p_best reaches
    ``bar`` (``DECIDE_P_BEST``: why 0.95 and not an even split of 5% over the looks, in docs/STATISTICS.md: that
    split was measured far more conservative than needed, since the looks share most of their data)."""
    n = {a: int(np.asarray(p).size) for a, p in groups.items()}
    need = bar
    if len(groups) < 2:
        return Decision(False, None, None, {}, n, need, f"{len(groups)} candidate author(s): nothing to compare")
    short = {a: min_envs - k for a, k in n.items() if k < min_envs}
    pb = p_best(groups, costs, n_boot, seed)
    order = sorted(pb, key=lambda a: (-pb[a], a))
    leader, runner = order[0], order[1]
    if short:
        more = ", ".join(f"{a} {k} more" for a, k in sorted(short.items()))
        return Decision(False, leader, runner, pb, n, need,
                        f"insufficient data: every author needs {min_envs} environments ({more})")
    if pb[leader] >= need:
        return Decision(True, leader, runner, pb, n, need, f"decided: p_best {pb[leader]:.3f} >= {need:.3f}")
    return Decision(False, leader, runner, pb, n, need, f"not yet: p_best {pb[leader]:.2f} < {need:.3f}")


@dataclass(frozen=True)
class Sizing:
    """How :func:`envs_needed` sizes an experiment: the decision it sizes for (one look names the leader with
    ``p_best >= target`` in at least ``power`` of the runs, every author at least ``min_envs`` environments) and
    the simulation that measures it (``sims`` runs, ``n_boot`` replicates each, drawn from ``seed``)."""

    target: float = TARGET
    power: float = POWER
    min_envs: int = MIN_ENVS
    sims: int = 100
    n_boot: int = 300
    seed: int = 0


def envs_needed(groups: dict[str, np.ndarray], costs: dict[str, float] | None = None,
                sizing: Sizing = Sizing()) -> int | None:
    """The smallest size of ``SIZES`` (environments per author, at least ``sizing.min_envs``) at which one look
    names the measured leader with ``p_best >= target`` in at least ``power`` of ``sims`` simulated runs
    (``sizing``); None when no size up to ``MAX_ENVS`` does (the leaders are too close to separate affordably) or
    nothing was measured.

    ``groups``: author -> the measured P(learnable) of its slots; a simulated run of size n draws n of them with
    replacement per author (the measured spread of learnable rates, slot to slot), then ``p_best``.
    ``costs``: author -> mean cost of a slot (compared per dollar, as ``author_value`` ranks)."""
    groups = {a: np.asarray(p, float) for a, p in groups.items() if np.asarray(p).size}
    if len(groups) < 2:
        return None
    leader = max(groups, key=lambda a: groups[a].mean() / ((costs or {}).get(a) or 1.0))
    target, power, sims, n_boot, seed = sizing.target, sizing.power, sizing.sims, sizing.n_boot, sizing.seed
    min_envs = sizing.min_envs
    rng = np.random.default_rng(seed)
    for n in (x for x in SIZES if x >= min_envs and x <= MAX_ENVS):
        hits = 0
        for i in range(sims):
            run = {a: p[rng.integers(0, p.size, n)] for a, p in groups.items()}
            slot_costs = {a: np.full(n, float(c)) for a, c in costs.items()} if costs else None
            hits += p_best(run, slot_costs, n_boot, seed=seed + i)[leader] >= target
            if hits >= power * sims or hits + sims - 1 - i < power * sims:
                break  # decided either way
        if hits >= power * sims:
            return n
    return None


def size_for_decision(groups: dict[str, np.ndarray], costs: dict[str, float] | None = None,
                      sizing: Sizing = Sizing()) -> int | None:
    """The size ``envduels plan`` and the answer publish: ``SIZE_FACTOR`` times ``envs_needed`` (which, from a
    pilot's few slots, undersizes: the measured gap is as often too wide as too narrow, and a too-wide one
    shrinks the size more than a too-narrow one grows it)."""
    n = envs_needed(groups, costs, sizing)
    return None if n is None else SIZE_FACTOR * n


def _pooled_posterior(seeds: int, q: float, grid: int = 40) -> np.ndarray:
    """P(learnable | k_cold, k_hint) for every count pair, under the generator's own rate distribution with the
    learnable share ``q`` (what the product's fitted joint prior approaches with enough rows): a (seeds + 1)^2
    table."""
    from scipy.stats import binom

    pts = (np.arange(grid) + 0.5) / grid
    region = (pts[:, None] <= 0.25) & (pts[None, :] >= 0.5)
    like = binom.pmf(np.arange(seeds + 1)[:, None], seeds, pts[None, :])  # (k, grid)
    joint = like[:, None, :, None] * like[None, :, None, :]  # (kc, kh, c, h)
    inside = (joint * region).sum(axis=(2, 3)) / region.sum()
    outside = (joint * ~region).sum(axis=(2, 3)) / (~region).sum()
    return q * inside / (q * inside + (1 - q) * outside)


def simulate_tournament(rng: np.random.Generator, rates: dict[str, float], n_envs: int, seeds: int,
                        posterior: str = "pooled") -> dict:
    """A synthetic tournament with known truth: for each author, ``n_envs`` environments, each learnable with its
    author's rate; a learnable one has true cold rate U(0, 0.25) and hinted U(0.5, 1), another one a rate pair
    drawn uniformly outside that region; ``seeds`` matched seeds give the counts. P(learnable) of each:
    ``posterior`` "pooled": the exact posterior under the generator with the authors' mean learnable share (what
    the product's fitted joint prior approaches with enough rows; sharp), "jeffreys": independent Jeffreys priors
    on the two rates (``core.stats.admission``; no borrowing, vague). Returns author -> P(learnable) per
    environment."""
    from envduels_dagster.core.stats.admission import learnable_probability

    table = _pooled_posterior(seeds, float(np.mean(list(rates.values())))) if posterior == "pooled" else None
    out = {}
    for a, q in rates.items():
        learn = rng.random(n_envs) < q
        cold, hint = rng.uniform(0, 0.25, n_envs), rng.uniform(0.5, 1.0, n_envs)
        for i in np.flatnonzero(~learn):
            while True:
                c, h = rng.random(2)
                if not (c <= 0.25 and h >= 0.5):
                    cold[i], hint[i] = c, h
                    break
        kc, kh = rng.binomial(seeds, cold), rng.binomial(seeds, hint)
        out[a] = (table[kc, kh] if table is not None else
                  np.asarray(learnable_probability(kc, kh, np.full(n_envs, seeds)), float))
    return out


def extend(rng: np.random.Generator, rates: dict[str, float], have: dict[str, np.ndarray], wave: int,
           seeds: int, posterior: str = "pooled") -> dict[str, np.ndarray]:
    """``have`` plus one wave of ``wave`` new environments per author (earlier ones kept, as from the call cache)."""
    more = simulate_tournament(rng, rates, wave, seeds, posterior)
    return {a: np.concatenate([have.get(a, np.zeros(0)), more[a]]) for a in rates}
