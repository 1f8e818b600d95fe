"""What a published result table must satisfy: the rules behind the data checks of the four result assets.

Why in core: ``rankings``, ``design_convergence``, ``authoring_progress`` and ``lift_learning`` are
computed in Python and had no checks at all; a NaN strength, a rank of 0 or an inverted interval went
straight to the UI. The rules are plain pandas so that they are tested on hand-made bad tables; the
Dagster checks (``assets/checking/results.py``) only read the tables and report. Each function returns
{check name: [problem, ...]}; an empty list passes. Problems name the row and the values.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

TOL = 1e-9
SHOW = 3  # examples per problem


def _num(df: pd.DataFrame, col: str) -> np.ndarray:
    return pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float) if col in df else np.full(len(df), np.nan)


def _examples(df: pd.DataFrame, mask, key: str, cols: list[str]) -> str:
    rows = df[np.asarray(mask, dtype=bool)].head(SHOW)
    shown = [", ".join(f"{c}={r[c]}" for c in [key, *cols] if c in r) for _, r in rows.iterrows()]
    return f"{int(np.sum(mask))} of {len(df)} rows, e.g. [" + "; ".join(shown) + "]"


def interval_problems(df: pd.DataFrame, key: str, pairs: list[tuple[str, str, str]]) -> list[str]:
    """(estimate, lower, upper): lower <= upper; both bounds set or both NULL; no bound without an estimate."""
    out = []
    for est, lo_c, hi_c in pairs:
        if lo_c not in df or hi_c not in df:
            out.append(f"column {lo_c if lo_c not in df else hi_c} is missing")
            continue
        lo, hi, x = _num(df, lo_c), _num(df, hi_c), _num(df, est)
        bad = ~np.isnan(lo) & ~np.isnan(hi) & (lo > hi + TOL)
        if bad.any():
            out.append(f"{lo_c} <= {hi_c} fails: " + _examples(df, bad, key, [lo_c, hi_c]))
        half = np.isnan(lo) != np.isnan(hi)
        if half.any():
            out.append(f"{lo_c} and {hi_c} are both set or both NULL: " + _examples(df, half, key, [lo_c, hi_c]))
        orphan = np.isnan(x) & ~np.isnan(lo)
        if orphan.any():
            out.append(f"an interval {lo_c}/{hi_c} without its estimate {est}: " + _examples(df, orphan, key, [est]))
    return out


def range_problems(df: pd.DataFrame, key: str, col: str, lo: float, hi: float, allow_nan: bool = True) -> list[str]:
    x = _num(df, col)
    bad = (x < lo - TOL) | (x > hi + TOL) | ((not allow_nan) & np.isnan(x))
    return [f"{col} in [{lo:g}, {hi:g}]{'' if allow_nan else ' and set'} fails: " + _examples(df, bad, key, [col])] \
        if bad.any() else []


def _claimed_problems(df: pd.DataFrame, key: str, est: str, reason: str) -> list[str]:
    """An interval with no reason must be set (no NaN where one is claimed); a withheld one must say why."""
    lo, x = _num(df, f"{est}_lower"), _num(df, est)
    no_reason = df[reason].isna().to_numpy()
    out = []
    bad = no_reason & ~np.isnan(x) & np.isnan(lo)
    if bad.any():
        out.append(f"{est} interval is NULL without {reason}: " + _examples(df, bad, key, [est]))
    shown = ~no_reason & ~np.isnan(lo)
    if shown.any():
        out.append(f"{est} interval is set although {reason} withholds it: " + _examples(df, shown, key, [reason]))
    return out


def rankings_problems(table: pd.DataFrame, summary: pd.DataFrame) -> dict[str, list[str]]:
    """Rules of tables ``rankings`` (one row per model) and ``rankings_summary`` (one row)."""
    n = len(table)
    ranks = [c for c in table.columns if c.endswith("_rank") or c.endswith("_rank_lower") or c.endswith("_rank_upper")]
    out: dict[str, list[str]] = {"ranks_within_1_to_n": [], "intervals_ordered": [], "no_nan_published": [],
                                 "sample_sizes_reported": []}
    for c in ranks:
        out["ranks_within_1_to_n"] += range_problems(table, "model", c, 1, max(n, 1))
    scores = ["solver_score", "solver_hinted", "author_score", "design_score", "design_score_corrected",
              "bt_strength"]
    pairs = [(s, f"{s}_lower", f"{s}_upper") for s in scores if s in table]
    pairs += [(s, f"{s}_ci_lower", f"{s}_ci_upper") for s in scores if f"{s}_ci_lower" in table]
    pairs += [(f"{s}_rank", f"{s}_rank_lower", f"{s}_rank_upper") for s in ("solver", "author", "bt")
              if f"{s}_rank_lower" in table]
    pairs += [(s, f"{s}_population_lower", f"{s}_population_upper") for s in ("bt_strength", "bt_rank")
              if f"{s}_population_lower" in table]
    out["intervals_ordered"] = interval_problems(table, "model", pairs)
    for c in ("bt_rank_population_lower", "bt_rank_population_upper"):
        if c in table:
            out["ranks_within_1_to_n"] += range_problems(table, "model", c, 1, max(n, 1))
    for s in ("bt_strength", "bt_rank"):  # the mart's tournament is one completion of the sign set: inside
        lo_c, hi_c = f"{s}_population_lower", f"{s}_population_upper"
        if lo_c in table:
            x, bound_lo, bound_hi = _num(table, s), _num(table, lo_c), _num(table, hi_c)
            bad = ~np.isnan(bound_lo) & ((x < bound_lo - 1e-6) | (x > bound_hi + 1e-6))
            if bad.any():
                out["intervals_ordered"].append(f"{s} outside its population bounds: "
                                                + _examples(table, bad, "model", [s, lo_c, hi_c]))
    if "bt_strength_reason" in table:  # the environment-level BT interval: shown, or withheld with a reason
        out["no_nan_published"] += _claimed_problems(table, "model", "bt_strength", "bt_strength_reason")
    for s in ("solver_score", "bt_strength"):  # every model solves and duels: these are always published
        if s in table and np.isnan(_num(table, s)).any():
            out["no_nan_published"].append(f"{s} is NaN: " + _examples(table, np.isnan(_num(table, s)), "model", [s]))
    for s in scores:  # a score without a rank, or a rank without a score
        if s in table and f"{s.split('_')[0]}_rank" in table and s in ("solver_score", "author_score"):
            r = f"{s.split('_')[0]}_rank"
            bad = np.isnan(_num(table, s)) != np.isnan(_num(table, r))
            if bad.any():
                out["no_nan_published"].append(f"{s} and {r} are both set or both NULL: "
                                               + _examples(table, bad, "model", [s, r]))
    for s in [*scores, "solver_rank", "author_rank"]:  # a bootstrap interval: shown, or withheld with a reason
        if f"{s}_interval_reason" in table:
            out["no_nan_published"] += _claimed_problems(table, "model", s, f"{s}_interval_reason")
    for s in scores:  # a withheld t interval says why
        if f"{s}_ci_reason" in table:
            bad = np.isnan(_num(table, f"{s}_ci_lower")) & table[f"{s}_ci_reason"].isna().to_numpy()
            bad &= ~np.isnan(_num(table, s))
            if bad.any():
                out["no_nan_published"].append(f"{s}_ci withheld without a reason: "
                                               + _examples(table, bad, "model", [s]))
    for c in ("author_n_envs", "solver_n_envs"):  # the per-model samples behind its figures
        if c not in table:
            out["sample_sizes_reported"].append(f"column {c} is missing")
        else:
            out["sample_sizes_reported"] += range_problems(table, "model", c, 0, np.inf, allow_nan=False)
    if "author_n_envs" in table and "author_score" in table:
        bad = ~np.isnan(_num(table, "author_score")) & (_num(table, "author_n_envs") < 1)
        if bad.any():
            out["sample_sizes_reported"].append("an author score over no environment: "
                                                + _examples(table, bad, "model", ["author_score", "author_n_envs"]))
    if len(summary) != 1:
        out["sample_sizes_reported"].append(f"rankings_summary has {len(summary)} rows (expected 1)")
        return out
    s = summary.iloc[0]
    for col, minimum in (("n_models", 1), ("n_envs", 1), ("n_duels", 0), ("n_boot", 1)):
        v = s.get(col)
        if v is None or (isinstance(v, float) and math.isnan(v)) or float(v) < minimum:
            out["sample_sizes_reported"].append(f"rankings_summary.{col} = {v} (expected >= {minimum})")
    if s.get("n_models") is not None and not pd.isna(s.get("n_models")) and int(s["n_models"]) != n:
        out["sample_sizes_reported"].append(f"rankings_summary.n_models = {s['n_models']} but rankings has {n} rows")
    one = summary.assign(row="summary")
    claimed = [(f, f"{f}_lower", f"{f}_upper") for f in ("kendall_zeta", "cyclic_triads", "role_rho")
               if f"{f}_lower" in one]
    out["intervals_ordered"] += interval_problems(one, "row", claimed)
    for f, reason in (("kendall_zeta", "kendall_zeta_reason"), ("cyclic_triads", "cyclic_triads_reason"),
                      ("role_rho", "role_rho_reason")):
        if reason in one:
            out["no_nan_published"] += _claimed_problems(one, "row", f, reason)
    if "population_interval_reason" in one:  # the population bounds: shown, or withheld with a reason
        pop = [(f, f"{f}_population_lower", f"{f}_population_upper") for f in ("kendall_zeta", "cyclic_triads")
               if f"{f}_population_lower" in one]
        out["intervals_ordered"] += interval_problems(one, "row", pop)
        withheld = not pd.isna(s.get("population_interval_reason"))
        for f, lo_c, _ in pop:
            shown, estimated = not pd.isna(s.get(lo_c)), not pd.isna(s.get(f))
            if (withheld and shown) or (not withheld and estimated and not shown):  # (zeta: none below 3 models)
                out["no_nan_published"].append(
                    f"{lo_c} = {s.get(lo_c)} with population_interval_reason = {s.get('population_interval_reason')}"
                    " (bounds are set exactly when no reason withholds them)")
        rows = ~np.isnan(_num(table, "bt_strength"))
        if "bt_strength_population_lower" in table and rows.any():
            pop_lo = _num(table, "bt_strength_population_lower")[rows]
            if (np.isnan(pop_lo).any() and not withheld) or ((~np.isnan(pop_lo)).any() and withheld):
                out["no_nan_published"].append(
                    "bt_strength_population bounds disagree with population_interval_reason = "
                    f"{s.get('population_interval_reason')}: {int(np.isnan(pop_lo).sum())} of {int(rows.sum())} NULL")
    for f, lo, hi in (("kendall_zeta", 0, 1), ("role_rho", -1, 1)):
        for c in (f, f"{f}_lower", f"{f}_upper"):
            if c in one:
                out["no_nan_published"] += range_problems(one, "row", c, lo, hi)
    for col in ("role_p_value",):
        v = s.get(col)
        if v is not None and not pd.isna(v) and not 0 < float(v) <= 1:
            out["no_nan_published"].append(f"rankings_summary.{col} = {v} (expected in (0, 1])")
    return out


def design_convergence_problems(table: pd.DataFrame) -> dict[str, list[str]]:
    """Rules of table ``design_convergence`` (one overall row, a row per author and per author pair)."""
    key = "scope"
    t = table.assign(row=table["scope"].astype(str) + ":" + table["author_a"].astype(str) + "|"
                     + table["author_b"].astype(str)) if len(table) else table.assign(row=[])
    out = {"intervals_ordered": interval_problems(t, "row", [("null_mean", "null_lower", "null_upper")]),
           "no_nan_published": [], "sample_sizes_reported": []}
    n_pairs = _num(t, "n_env_pairs")
    measured = n_pairs > 0
    for c in ("similarity", "p_value"):
        bad = measured & np.isnan(_num(t, c))
        if bad.any():
            out["no_nan_published"].append(f"{c} is NaN on a row with environment pairs: "
                                           + _examples(t, bad, "row", [c, "n_env_pairs"]))
    out["no_nan_published"] += range_problems(t, "row", "similarity", 0, 1) + range_problems(t, "row", "p_value", 0, 1)
    if "p_value_holm" in t:
        out["no_nan_published"] += range_problems(t, "row", "p_value_holm", 0, 1)
        bad = _num(t, "p_value_holm") < _num(t, "p_value") - TOL
        if bad.any():
            out["no_nan_published"].append("p_value_holm >= p_value fails: "
                                           + _examples(t, bad, "row", ["p_value", "p_value_holm"]))
    if np.isnan(n_pairs).any() or (n_pairs < 0).any():
        out["sample_sizes_reported"].append("n_env_pairs is set and >= 0 fails: "
                                            + _examples(t, np.isnan(n_pairs) | (n_pairs < 0), "row", ["n_env_pairs"]))
    if len(t) and int((t[key] == "overall").sum()) != 1:
        out["sample_sizes_reported"].append(f"{int((t[key] == 'overall').sum())} overall rows (expected 1)")
    return out


def authoring_progress_problems(table: pd.DataFrame) -> dict[str, list[str]]:
    """Rules of table ``authoring_progress`` (per author and hardening round)."""
    t = table.assign(row=table["author"].astype(str) + "@" + table["round"].astype(str)) if len(table) \
        else table.assign(row=[])
    out = {"intervals_ordered": interval_problems(t, "row", [(f"{k}_change", f"{k}_change_lower",
                                                              f"{k}_change_upper") for k in ("design", "hint")]),
           "no_nan_published": [], "sample_sizes_reported": []}
    for k in ("design", "hint"):
        if f"{k}_change_reason" in t:  # the t interval over lineage pairs: shown, or withheld with a reason
            out["no_nan_published"] += _claimed_problems(t, "row", f"{k}_change", f"{k}_change_reason")
        out["no_nan_published"] += range_problems(t, "row", f"{k}_change", -1, 1)
        bad = (_num(t, "n_pairs") > 0) & np.isnan(_num(t, f"{k}_change"))
        if bad.any():
            out["no_nan_published"].append(f"{k}_change is NaN on a row with lineage pairs: "
                                           + _examples(t, bad, "row", ["n_pairs"]))
    out["sample_sizes_reported"] += range_problems(t, "row", "n_pairs", 1, np.inf, allow_nan=False)
    out["sample_sizes_reported"] += range_problems(t, "row", "round", 1, np.inf, allow_nan=False)
    return out


def lift_learning_problems(table: pd.DataFrame) -> dict[str, list[str]]:
    """Rules of table ``lift_learning`` (per learner and author)."""
    t = table.assign(row=table["learner"].astype(str) + "<-" + table["author"].astype(str)) if len(table) \
        else table.assign(row=[])
    out: dict[str, list] = {"no_nan_published": [], "sample_sizes_reported": []}
    trained = _num(t, "n_train_envs") > 0
    for c in ("cold_before", "cold_after"):
        out["no_nan_published"] += range_problems(t, "row", c, 0, 1)
    out["no_nan_published"] += range_problems(t, "row", "lift", -1, 1)
    for c in ("cold_before", "cold_after", "gain"):  # lift may be missing (no pair_lift row): correlate drops it
        bad = trained & np.isnan(_num(t, c))
        if bad.any():
            out["no_nan_published"].append(f"{c} is NaN on a row that trained: " + _examples(t, bad, "row", [c]))
    bad = np.abs(_num(t, "cold_after") - _num(t, "cold_before") - _num(t, "gain")) > 1e-6
    if bad.any():
        out["no_nan_published"].append("gain = cold_after - cold_before fails: "
                                       + _examples(t, bad, "row", ["cold_before", "cold_after", "gain"]))
    out["sample_sizes_reported"] += range_problems(t, "row", "n_train_envs", 0, np.inf, allow_nan=False)
    out["sample_sizes_reported"] += range_problems(t, "row", "n_heldout_envs", 1, np.inf, allow_nan=False)
    return out


def skill_change_problems(figures: dict) -> dict[str, list[str]]:
    """Rules of the skill -> improvement figures ``authoring_progress`` publishes as metadata
    (``core.rankings.progress.skill_vs_change`` and ``skill_change_interval``; a reason of "" or None = published)."""
    row = pd.DataFrame([{k: (None if v == "" else v) for k, v in figures.items()}]).assign(row="summary")
    out: dict[str, list[str]] = {"intervals_ordered": [], "no_nan_published": [], "sample_sizes_reported": []}
    for k in ("design", "hint"):
        est, reason = f"skill_vs_{k}_change_rho", f"skill_vs_{k}_change_reason"
        row = row.rename(columns={f"skill_vs_{k}_change_lower": f"{est}_lower",
                                  f"skill_vs_{k}_change_upper": f"{est}_upper"})
        out["intervals_ordered"] += interval_problems(row, "row", [(est, f"{est}_lower", f"{est}_upper")])
        if reason in row:
            out["no_nan_published"] += _claimed_problems(row, "row", est, reason)
        for c in (est, f"{est}_lower", f"{est}_upper"):
            out["no_nan_published"] += range_problems(row, "row", c, -1, 1)
        out["no_nan_published"] += range_problems(row, "row", f"skill_vs_{k}_change_p", 0, 1)
    for c in ("skill_vs_change_n_authors", "skill_vs_change_n_pairs", "skill_vs_change_n_boot"):
        out["sample_sizes_reported"] += range_problems(row, "row", c, 0, np.inf, allow_nan=False)
    return out


def _figure(figures: dict, key: str) -> float:
    v = figures.get(key)
    try:
        return float("nan") if v is None or v == "" else float(v)
    except (TypeError, ValueError):
        return float("nan")


def progress_figure_problems(figures: dict | None, table: pd.DataFrame) -> dict[str, list[str]]:
    """The skill -> improvement figures ``authoring_progress`` published as metadata, against its table:
    the rules of :func:`skill_change_problems`, and rho / p equal to what ``skill_vs_change`` gives on the table
    (a figure that disagrees with the table it describes is stale or wrong)."""
    from envduels_dagster.core.rankings.progress import skill_vs_change

    out: dict[str, list[str]] = {"intervals_ordered": [], "no_nan_published": [], "sample_sizes_reported": []}
    if figures is None:
        out["sample_sizes_reported"].append("no materialization metadata: the skill -> improvement figures "
                                            "cannot be checked (materialize authoring_progress)")
        return out
    for name, problems in skill_change_problems(figures).items():
        out[name] += problems
    for key, value in (skill_vs_change(table).items() if "round" in table else []):  # round 1, as the asset
        shown = _figure(figures, key)
        if not (math.isnan(shown) and math.isnan(value)) and not abs(shown - value) <= TOL:
            out["no_nan_published"].append(f"metadata {key} = {figures.get(key)} but the table gives {value:.6g}")
    return out


def learning_figure_problems(figures: dict | None, table: pd.DataFrame) -> dict[str, list[str]]:
    """The lift -> learning figures ``lift_learning`` published as metadata (``learning_study.correlation_summary``):
    rho in [-1, 1] and p in (0, 1] or withheld with a reason, sizes set and equal to the table's trained rows."""
    out: dict[str, list[str]] = {"no_nan_published": [], "sample_sizes_reported": []}
    if figures is None:
        out["sample_sizes_reported"].append("no materialization metadata: the lift -> learning figures cannot be "
                                            "checked (materialize lift_learning)")
        return out
    n = _figure(figures, "n_pairs")
    rho, p = _figure(figures, "spearman_lift_vs_gain"), _figure(figures, "permutation_p")
    reason = figures.get("permutation_p_reason") or None
    if not math.isnan(rho) and not -1 - TOL <= rho <= 1 + TOL:
        out["no_nan_published"].append(f"spearman_lift_vs_gain = {rho} (expected in [-1, 1])")
    if math.isnan(rho) and not math.isnan(n) and n >= 3:
        out["no_nan_published"].append(f"spearman_lift_vs_gain is NaN over {int(n)} rows")
    if not math.isnan(p) and not 0 < p <= 1:
        out["no_nan_published"].append(f"permutation_p = {p} (expected in (0, 1])")
    if math.isnan(p) and reason is None:
        out["no_nan_published"].append("permutation_p is NaN without permutation_p_reason")
    if not math.isnan(p) and reason is not None:
        out["no_nan_published"].append(f"permutation_p = {p} is set although permutation_p_reason withholds it")
    for key in ("n_pairs", "n_learners", "n_authors"):
        v = _figure(figures, key)
        if math.isnan(v) or v < 0:
            out["sample_sizes_reported"].append(f"{key} = {figures.get(key)} (expected a count >= 0)")
    from envduels_dagster.core.studies.learning import studied_rows

    trained = studied_rows(table)
    if not math.isnan(n) and int(n) != len(trained):
        out["sample_sizes_reported"].append(f"n_pairs = {int(n)} but the table has {len(trained)} rows that trained "
                                            "and have a lift")
    return out
