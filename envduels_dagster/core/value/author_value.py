"""Which author to pay, for one learner: learnable environments per environment written, per dollar, per call.

Why this exists: the practical advice behind EnvDuels is "let a few models write hard tasks
with hints, keep the ones *your* model fails cold but passes hinted, and check whether a
cheaper model is the better task writer". Mean peer lift pooled over every solver, with no
notion of cost, cannot answer that; this module can, for one learner at a time.

Units. A *lineage* is one environment slot an author was asked for: its round-0 attempt and
every hardened version (``parent_env_id`` chains). It yields P(learnable) of its newest valid
version (0 when no version is valid): the training set's ``p_learnable``, the one definition of
learnable (``core.stats.learnable``: true cold rate <= 0.25 and true hinted rate >= 0.5), so
``expected_learnable`` is the expected number of the author's environments that are learnable
for the learner, the ones the training set admits being those it is sure enough of) and costs every call spent on it
(authoring, rejected attempts, hardening; validation makes no model calls). Lineages are
the unit of resampling. A valid lineage the learner never completed a matched seed on is
left out of the sample (missing, not zero) and counted in ``n_unplayed``.

Intervals: 95% percentile intervals of replicates: each draws which lineages are learnable
(Bernoulli of each P(learnable), so seed-level uncertainty is carried), then the author's rate
from its Jeffreys posterior, and resamples the lineages' costs and calls
(``core.value.decision.rate_replicates``). Ranks come from the same replicates (``rank_lower``..``rank_upper``).
Below ``MIN_ENVS`` lineages an author has no interval and no rank ("insufficient data");
measured coverage: docs/STATISTICS.md, "Author value".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from envduels_dagster.core.stats.learnable import COLD_CEILING, MIN_HINT, learnable_rows
from envduels_dagster.core.value.decision import rate_replicates

ALPHA = 0.05
RANKED, SELF, INSUFFICIENT = "ranked", "self-authored (not ranked)", "insufficient data"
#: An author without a price among priced ones: listed apart with its per-call figures, never ranked per dollar
#: (one unpriced model must not switch every learner's ranking to per call; issue 32).
UNPRICED = "no price (listed apart)"
#: Environment slots in an author's sample below which it is "insufficient data": not ranked, no intervals. The
#: intervals covered 0.918-0.930 at 3 slots and 0.943-0.952 at 4 (benchmarks/calibration_value.py, 600 a size).
MIN_ENVS = 4

COLUMNS = [
    "learner", "author", "is_self", "status", "n_slots", "n_envs", "n_written", "n_valid", "validity_rate", "n_unplayed",
    "n_seeds", "expected_learnable", "per_env", "per_env_lower", "per_env_upper", "author_calls",
    "author_tokens", "author_cost_usd", "priced", "price_note", "per_usd", "per_usd_lower", "per_usd_upper",
    "per_kcall", "per_kcall_lower", "per_kcall_upper", "eval_calls", "eval_cost_usd", "rank_basis", "rank",
    "rank_lower", "rank_upper", "p_best"]
MIX_COLUMNS = ["learner", "author", "currency", "budget", "share", "envs_to_write", "expected_learnable",
               "expected_lower", "expected_upper"]


def lineages(envs: pd.DataFrame) -> pd.DataFrame:
    """Per environment row: its lineage root and whether it is the newest valid version of that lineage."""
    parent = dict(zip(envs["env_id"], envs["parent_env_id"]))

    def root(env_id: str) -> str:
        seen = set()
        while isinstance(parent.get(env_id), str) and parent[env_id] in parent and env_id not in seen:
            seen.add(env_id)
            env_id = parent[env_id]
        return env_id

    out = envs.assign(lineage=[root(e) for e in envs["env_id"]])
    valid = out[out["valid"].astype(bool)].sort_values(["lineage", "round"])
    newest = set(valid.groupby("lineage")["env_id"].last())
    return out.assign(newest_valid=out["env_id"].isin(newest))


def _lineage_frame(envs: pd.DataFrame, episodes: pd.DataFrame, learner: str, cold_ceiling: float = COLD_CEILING,
                   min_hint: float = MIN_HINT) -> pd.DataFrame:
    """One row per lineage: author, valid, played, p (P(learnable) of its newest valid version), n_seeds, calls,
    tokens, cost. ``p`` is the training set's ``p_learnable`` (``core.stats.learnable``: one definition)."""
    env = lineages(envs)
    found = learnable_rows(episodes, envs, learner, cold_ceiling, min_hint).rows
    per_env = found.groupby("env_id").agg(n_seeds=("n_seeds", "sum"), p=("p_learnable", "max"))
    env["cost"] = pd.to_numeric(env["author_cost_usd"], errors="coerce")
    env["calls"] = pd.to_numeric(env["author_calls"], errors="coerce").fillna(1)
    env["tokens"] = (pd.to_numeric(env["author_prompt_tokens"], errors="coerce").fillna(0)
                     + pd.to_numeric(env["author_completion_tokens"], errors="coerce").fillna(0))
    rows = []
    for (author, lineage), grp in env.groupby(["author", "lineage"], sort=True):
        newest = grp[grp["newest_valid"]]
        valid = not newest.empty
        n_seeds, p = 0, 0.0
        if valid and newest["env_id"].iloc[0] in per_env.index:
            n_seeds, p = int(per_env.at[newest["env_id"].iloc[0], "n_seeds"]), float(
                per_env.at[newest["env_id"].iloc[0], "p"])
        rows.append({"author": author, "lineage": lineage, "n_written": len(grp), "n_valid": int(grp["valid"].sum()),
                     "valid": valid, "played": n_seeds > 0, "p": p, "n_seeds": n_seeds,
                     "calls": float(grp["calls"].sum()), "tokens": float(grp["tokens"].sum()),
                     "cost": float(grp["cost"].sum()) if grp["cost"].notna().all() else np.nan})
    return pd.DataFrame(rows, columns=["author", "lineage", "n_written", "n_valid", "valid", "played", "p",
                                       "n_seeds", "calls", "tokens", "cost"])


def slot_probabilities(envs: pd.DataFrame, episodes: pd.DataFrame, learner: str, cold_ceiling: float = COLD_CEILING,
                       min_hint: float = MIN_HINT) -> dict[str, np.ndarray]:
    """Author -> the P(learnable) of each slot in its sample (0 for a slot with no valid version), as counted by
    ``author_value``; what ``core.value.decision.envs_needed`` resamples."""
    lin = _lineage_frame(envs, episodes, learner, cold_ceiling, min_hint)
    sample = lin[~lin["valid"] | lin["played"]]
    return {str(a): np.where(g["valid"], g["p"], 0.0).astype(float) for a, g in sample.groupby("author")}


def _interval(samples: np.ndarray, estimate: float) -> tuple[float, float]:
    """Plain 95% percentile interval of the replicates (NaN without an estimate). Not widened to hold the
    estimate: it used to be, which made "the interval holds its estimate" true by construction; the interval's
    coverage is measured instead (benchmarks/calibration_value.py, docs/STATISTICS.md)."""
    samples = samples[np.isfinite(samples)]
    if not np.isfinite(estimate) or samples.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.quantile(samples, [ALPHA / 2, 1 - ALPHA / 2])
    return float(lo), float(hi)


def _ratio(num: float, den: float, scale: float = 1.0) -> float:
    return scale * num / den if np.isfinite(den) and den > 0 else float("nan")


@dataclass(frozen=True)
class ValueConfig:
    """How the value question is answered (the ``ValueSettings`` resource, plus the bootstrap's seed): the
    budget the mix splits (``projection_budget_usd`` when authors are priced, else ``projection_budget_calls``; at most ``max_share`` of
    it per author), the sample an author needs to be ranked (``min_envs`` lineages) and the bootstrap
    (``n_boot`` replicates drawn from ``seed``)."""

    projection_budget_usd: float = 100.0  # not a spending cap (that is the registry's budget_usd)
    projection_budget_calls: float = 10_000
    max_share: float = 1.0
    min_envs: int = MIN_ENVS
    n_boot: int = 2000
    seed: int = 0


def author_value(envs: pd.DataFrame, episodes: pd.DataFrame, learner: str, config: ValueConfig = ValueConfig(), *,
                 cold_ceiling: float = COLD_CEILING, min_hint: float = MIN_HINT) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(``author_value`` rows, ``author_value_mix`` rows) for ``learner``; see the module docstring.

    ``envs``: the ``environments`` table (every author, every round); ``episodes``: the ``episodes``
    table (at least the learner's). Authors ranked: not the learner, at least ``min_envs`` lineages in
    the sample. ``cold_ceiling`` and ``min_hint``: what counts as learnable (``core.stats.learnable``, the
    training set's rule). Basis: learnable per dollar when some candidate has a price: the priced ones are ranked per
    dollar and the unpriced ones listed apart (status ``UNPRICED``, no rank, their per-call figures kept);
    per thousand calls when no candidate has a price (said in ``rank_basis``; an unpriced author is never
    treated as free).
    """
    lin = _lineage_frame(envs, episodes, learner, cold_ceiling, min_hint)
    min_envs, n_boot = config.min_envs, config.n_boot
    rng = np.random.default_rng(config.seed)
    learner_eps = episodes[episodes["solver"] == learner]
    rows, reps = [], {}
    for author, grp in lin.groupby("author", sort=True):
        sample = grp[~grp["valid"] | grp["played"]]
        n = len(sample)
        p = np.where(sample["valid"], sample["p"], 0.0)
        cost, calls = sample["cost"].to_numpy(), sample["calls"].to_numpy()
        priced = bool(len(grp)) and bool(grp["cost"].notna().all())
        if n:
            # each replicate draws the author's rate (which slots are learnable, then its Jeffreys posterior;
            # core.value.decision.rate_replicates) and resamples the slots' costs and calls
            rate = rate_replicates(p, n_boot, rng)
            idx = rng.integers(0, n, size=(n_boot, n))
            with np.errstate(invalid="ignore", divide="ignore"):
                rep = {"per_env": rate,
                       "per_usd": rate * n / cost[idx].sum(axis=1) if priced else np.full(n_boot, np.nan),
                       "per_kcall": 1000 * rate * n / calls[idx].sum(axis=1)}
        else:
            rep = {k: np.full(n_boot, np.nan) for k in ("per_env", "per_usd", "per_kcall")}
        est = {"per_env": float(p.mean()) if n else float("nan"),
               "per_usd": _ratio(p.sum(), cost.sum()) if priced and n else float("nan"),
               "per_kcall": _ratio(p.sum(), calls.sum(), 1000.0) if n else float("nan")}
        is_self = author == learner
        status = SELF if is_self else RANKED if n >= min_envs else INSUFFICIENT
        mine = learner_eps[learner_eps["author"] == author]
        eval_cost = pd.to_numeric(mine["cost_usd"], errors="coerce")
        row = {"learner": learner, "author": author, "is_self": is_self, "status": status, "n_slots": len(grp),
               "n_envs": n,
               "n_written": int(grp["n_written"].sum()), "n_valid": int(grp["n_valid"].sum()),
               "validity_rate": float(grp["n_valid"].sum() / grp["n_written"].sum()),
               "n_unplayed": int((grp["valid"] & ~grp["played"]).sum()), "n_seeds": int(sample["n_seeds"].sum()),
               "expected_learnable": float(p.sum()), "author_calls": int(grp["calls"].sum()),
               "author_tokens": int(grp["tokens"].sum()),
               "author_cost_usd": float(grp["cost"].sum()) if priced else None, "priced": priced,
               "price_note": "" if priced else "no price: ranked by calls only, never as free",
               "eval_calls": int(pd.to_numeric(mine["model_calls"], errors="coerce").fillna(0).sum()),
               # what these runs spent on the learner's play (cache hits cost nothing); None: nothing priced
               "eval_cost_usd": float(eval_cost.sum()) if (eval_cost > 0).any() else None}
        for key, value in est.items():  # below the minimum sample: the estimate, but no interval
            lo, hi = _interval(rep[key], value) if n >= min_envs else (float("nan"), float("nan"))
            row.update({key: value, f"{key}_lower": lo, f"{key}_upper": hi})
        rows.append(row)
        reps[author] = rep
    table = pd.DataFrame(rows, columns=COLUMNS)
    return _rank(table, reps), _mix(table, reps, learner, config.projection_budget_usd, config.projection_budget_calls,
                                         config.max_share)


def _rank(table: pd.DataFrame, reps: dict) -> pd.DataFrame:
    candidates = table["status"] == RANKED
    basis = "per_usd" if (candidates & table["priced"].astype(bool)).any() else "per_kcall"
    if basis == "per_usd":  # priced and unpriced are ranked apart: the unpriced are listed, not ranked
        table.loc[candidates & ~table["priced"].astype(bool), "status"] = UNPRICED
    ranked = table[table["status"] == RANKED]
    table["rank_basis"] = basis
    if ranked.empty:
        return table
    order = ranked.sort_values([basis, "author"], ascending=[False, True])["author"].tolist()
    table.loc[table["status"] == RANKED, "rank"] = table["author"].map({a: i for i, a in enumerate(order, 1)})
    boots = np.column_stack([np.nan_to_num(reps[a][basis], nan=-np.inf) for a in order])  # (n_boot, n_ranked)
    ranks = (-boots).argsort(axis=1, kind="stable").argsort(axis=1) + 1
    for j, author in enumerate(order):
        at = table["author"] == author
        table.loc[at, "rank_lower"] = float(np.quantile(ranks[:, j], ALPHA / 2, method="lower"))
        table.loc[at, "rank_upper"] = float(np.quantile(ranks[:, j], 1 - ALPHA / 2, method="higher"))
        table.loc[at, "p_best"] = float((ranks[:, j] == 1).mean())
    for col in ("rank", "rank_lower", "rank_upper"):
        table[col] = table[col].astype("Int64")
    return table


def _mix(table: pd.DataFrame, reps: dict, learner: str, budget_usd: float, budget_calls: float,
         max_share: float) -> pd.DataFrame:
    """The budget split that maximises expected learnable environments (fractional knapsack: best rate first,
    at most ``max_share`` of the budget per author). Interval from the same bootstrap replicates."""
    ranked = table[table["status"] == RANKED].sort_values("rank")
    if ranked.empty:
        return pd.DataFrame(columns=MIX_COLUMNS)
    basis = ranked["rank_basis"].iloc[0]
    currency, budget = ("usd", float(budget_usd)) if basis == "per_usd" else ("calls", float(budget_calls))
    scale = 1.0 if basis == "per_usd" else 1 / 1000
    rows, left, total = [], budget, 0.0
    total_reps = np.zeros_like(next(iter(reps.values()))[basis])
    for r in ranked.itertuples(index=False):
        spend = min(left, max(0.0, max_share) * budget)
        if spend <= 0 or not getattr(r, basis) > 0:
            break
        left -= spend
        per_slot = (r.author_cost_usd if currency == "usd" else r.author_calls) / max(r.n_slots, 1)
        expected = getattr(r, basis) * scale * spend
        rep = np.nan_to_num(reps[r.author][basis]) * scale * spend
        total_reps = total_reps + rep
        total += expected
        lo, hi = _interval(rep, expected)
        rows.append({"learner": learner, "author": r.author, "currency": currency, "budget": spend,
                     "share": spend / budget if budget else 0.0,
                     "envs_to_write": spend / per_slot if per_slot > 0 else float("nan"),
                     "expected_learnable": expected, "expected_lower": lo, "expected_upper": hi})
    lo, hi = _interval(total_reps, total)
    rows.append({"learner": learner, "author": "(total)", "currency": currency, "budget": budget - left,
                 "share": (budget - left) / budget if budget else 0.0,
                 "envs_to_write": sum(r["envs_to_write"] for r in rows), "expected_learnable": total,
                 "expected_lower": lo, "expected_upper": hi})
    return pd.DataFrame(rows, columns=MIX_COLUMNS)
