"""Lift statistics from paired episodes (DESIGN §6).

Why paired and clustered: cold and hinted runs share seeds, so lift is computed
per matched seed; environments are the unit of sampling, so intervals come from
a cluster bootstrap over environments with each environment's seeds kept together.
Incomplete episodes (infrastructure or environment errors) are excluded, and a
seed counts only when both of its conditions completed.

Rounds never pool (DESIGN §6): every figure is per ``round`` (0 = original authoring), as in the dbt marts.
Episodes without a ``round`` column are round 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from envduels_dagster.core.stats.bootstrap import cluster_bootstrap_mean
from envduels_dagster.core.stats.intervals import mean_interval
from envduels_dagster.core.stats.matched_sql import matched_seeds_sql
from envduels_dagster.core.stats.rules import admits, categorize

KEY = ["round", "env_id", "author", "solver"]  # one environment x solver, within its round


def with_round(episodes: pd.DataFrame) -> pd.DataFrame:
    """The episodes with an integer ``round`` column (0 where absent: everything before rounds was round 0)."""
    if "round" in episodes.columns:
        return episodes.assign(round=episodes["round"].fillna(0).astype(int))
    return episodes.assign(round=0)


def matched_seeds(episodes: pd.DataFrame) -> pd.DataFrame:
    """One row per (round, env, solver, seed) with y_cold and y_hint, completed conditions only.

    The definition is the SQL of ``matched_sql.matched_seeds_sql`` (the checks run the same text in the
    warehouse; the dbt macro ``matched_seeds`` is held equal to it), run here on the frame by DuckDB."""
    import duckdb

    episodes = with_round(episodes)
    done = episodes[episodes["status"] != "incomplete"]
    if done.empty:
        return pd.DataFrame(columns=[*KEY, "seed", "y_cold", "y_hint"])
    with duckdb.connect() as conn:
        conn.register("episodes", episodes[[*KEY, "seed", "condition", "status"]])
        return conn.execute(f"{matched_seeds_sql('episodes', KEY)} ORDER BY ALL").df()


def env_solver_stats(episodes: pd.DataFrame) -> pd.DataFrame:
    """p_cold, p_hint, lift, rescue, harm and category per (round, environment, solver)."""
    m = matched_seeds(episodes)
    if m.empty:
        return pd.DataFrame(columns=[*KEY, "n_seeds", "p_cold", "p_hint", "lift",
                                     "rescue", "harm", "category"])
    g = m.groupby(KEY)
    out = g.agg(n_seeds=("seed", "size"), p_cold=("y_cold", "mean"), p_hint=("y_hint", "mean")).reset_index()
    out["lift"] = out["p_hint"] - out["p_cold"]
    rescue = m[m["y_cold"] == 0].groupby(KEY)["y_hint"].mean()
    harm = m[m["y_cold"] == 1].groupby(KEY)["y_hint"].apply(lambda s: (1 - s).mean())
    key = list(zip(*(out[c] for c in KEY)))
    out["rescue"] = [rescue.get(k, np.nan) for k in key]
    out["harm"] = [harm.get(k, np.nan) for k in key]
    out["category"] = categorize(out["p_cold"].to_numpy(), out["p_hint"].to_numpy())
    return out


# The diagnostic bootstrap (lift_boot_*) is given only from this many environments: below it the percentile
# cluster bootstrap was measured to under-cover (0.72 / 0.89 / 0.92 at 3 / 6 / 12, 0.96 at 30; docs/STATISTICS.md).
# The dbt var lift_boot_min_envs mirrors it.
LIFT_BOOT_MIN_ENVS = 30


def lift_boot_reason(n_envs: int, min_envs: int = LIFT_BOOT_MIN_ENVS) -> str | None:
    """Why the diagnostic bootstrap of a pair is withheld (None when it is given); the same text as the dbt mart."""
    if n_envs >= min_envs:
        return None
    return (f"not calibrated: {n_envs} environment{'' if n_envs == 1 else 's'} (the percentile bootstrap under-covers "
            f"below {min_envs}; the published interval is lift_ci_lower/lift_ci_upper)")


def pair_lift(episodes: pd.DataFrame, n_boot: int = 1000, boot_min_envs: int = LIFT_BOOT_MIN_ENVS) -> pd.DataFrame:
    """Mean matched-seed lift per (round, author, solver) with the published Student-t 95% interval over
    environments (lift_ci_lower/_upper, NaN with lift_ci_reason when not given; core/stats/intervals.py) and,
    as a diagnostic only, the percentile cluster bootstrap (lift_boot_lower/_upper), NaN with lift_boot_reason
    below ``boot_min_envs`` environments, where it under-covers (docs/STATISTICS.md). A smaller ``boot_min_envs``
    shows it anyway (the calibration benchmark measures it that way).

    Environments weigh equally (DESIGN §6), for p_cold and p_hint too, so lift = p_hint - p_cold.
    The dbt model ``pair_lift`` computes the same figures in SQL (its bootstrap from hash-seeded draws; the
    t interval identical).
    """
    cols = ["round", "author", "solver", "is_self_pair", "n_envs", "n_matched", "n_incomplete", "p_cold", "p_hint",
            "lift", "lift_boot_lower", "lift_boot_upper", "lift_ci_lower", "lift_ci_upper", "lift_ci_reason",
            "lift_boot_reason"]
    episodes = with_round(episodes)
    if "sampling" in episodes:  # as the mart: seeds the adaptive sampler played conditionally stay out
        episodes = episodes[episodes["sampling"].fillna("fixed") != "adaptive"]
    m = matched_seeds(episodes)
    rows = []
    incomplete = episodes[episodes["status"] == "incomplete"].groupby(["round", "author", "solver"]).size()
    for (round_, author, solver), grp in m.groupby(["round", "author", "solver"]):
        clusters = [(e["y_hint"] - e["y_cold"]).to_numpy() for _, e in grp.groupby("env_id")]
        lift, lo, hi = cluster_bootstrap_mean(clusters, n_boot=n_boot)
        boot_reason = lift_boot_reason(len(clusters), boot_min_envs)
        if boot_reason is not None:
            lo = hi = np.nan
        ci = mean_interval([float(np.mean(c)) for c in clusters])
        rows.append({"round": int(round_), "author": author, "solver": solver, "is_self_pair": author == solver,
                     "n_envs": grp["env_id"].nunique(), "n_matched": len(grp),
                     "n_incomplete": int(incomplete.get((round_, author, solver), 0)),
                     "p_cold": grp.groupby("env_id")["y_cold"].mean().mean(),
                     "p_hint": grp.groupby("env_id")["y_hint"].mean().mean(),
                     "lift": lift, "lift_boot_lower": lo, "lift_boot_upper": hi, "lift_ci_lower": ci.lower,
                     "lift_ci_upper": ci.upper, "lift_ci_reason": ci.reason, "lift_boot_reason": boot_reason})
    return pd.DataFrame(rows, columns=cols)


def training_candidates(stats: pd.DataFrame, learner: str, max_cold: float = 0.0, min_hint: float = 0.5,
                        include_self_authored: bool = False) -> pd.DataFrame:
    """Environments the learner fails cold (p_cold <= max_cold) but passes hinted (p_hint >= min_hint)."""
    s = stats[stats["solver"] == learner]
    if not include_self_authored:
        s = s[s["author"] != learner]
    keep = s[admits(s["p_cold"].to_numpy(), s["p_hint"].to_numpy(), max_cold, min_hint)]
    return keep.sort_values(["lift", "env_id"], ascending=[False, True]).reset_index(drop=True)
