"""Rankings with intervals: solvers, authors, Bradley-Terry on duels, transitivity, role separation (DESIGN §6).

Why a panel: every figure here is a weighted mean over environments, so one environment x solver
matrix and one (replicates x environments) weight matrix give the point estimate (weights 1) and every
bootstrap replicate in a few matrix products. Pure numpy/pandas; no Dagster. Inputs are the dbt marts
``env_solver_stats`` (one row per environment x solver over matched seeds) and ``duels``. The estimators
themselves live in ``core.stats``.

Rounds: the marts are per round and never pooled; a ranking is of one round, ``round_`` (default 0, the
benchmark: every model's original environments, each counted once). Both output tables carry that ``round``.

Uncertainty:
* Solver and author scores get intervals from a **cluster bootstrap over environments**: each replicate
  resamples every author's environments with replacement (stratified by author, so each author keeps its
  number of environments); an environment carries all of its solvers' matched-seed results, so seeds stay
  paired. Ranks are recomputed per replicate, giving rank intervals too. Both are published only from the
  sizes at which they were measured calibrated (``BOOT_MIN_ENVS``, ``RANK_MIN_ENVS``), NULL with a reason
  below; the t intervals (``<score>_ci_*``, ``core.rankings.intervals``) are the calibrated score intervals
  (the corrected design score's from ``DESIGN_T_MIN_ENVS`` environments by its author only).
* The Bradley-Terry fit uses the duel outcomes (1, 1/2 for a tie, 0); its intervals, and those of zeta and
  the cyclic triads, come from the same environment replicates, every duel re-decided by the mart's rule
  (``core.rankings.tournament``; withheld with a reason below the minimum environments per author).
* Transitivity counts cyclic triads, c = C(n,3) - sum_i C(w_i, 2), on the duel tournament. A tied duel
  counts half a win to each side; c is then the expected number of cyclic triads when every tie is broken
  by a fair coin (each tie adds 1/8 to the subtracted sum: Var of a coin flip / 2). Kendall's
  zeta = 1 - c / c_max with c_max = (n^3 - n)/24 (n odd) or (n^3 - 4n)/24 (n even).
* Role separation: Spearman correlation between solver rank and author rank, with a permutation p-value
  (exact over all permutations up to 8 models) and a bootstrap interval from the environment replicates.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from envduels_dagster.core.rankings.intervals import author_intervals, stratified_interval
from envduels_dagster.core.rankings.panel import Panel, RankingConfig, panel_from_stats  # noqa: F401 - re-exported
from envduels_dagster.core.rankings.population import population_columns
from envduels_dagster.core.rankings.published import (  # noqa: F401 - re-exported (rankings.BOOT_MIN_ENVS, ...)
    BOOT_MIN_ENVS,
    BOOTSTRAP_SCORES,
    DESIGN_T_MIN_ENVS,
    RANK_MIN_ENVS,
    T_MIN_ENVS,
    withhold_uncalibrated_bootstrap,
    withhold_uncalibrated_t,
)
from envduels_dagster.core.rankings.tournament import duel_models, tournament_columns
from envduels_dagster.core.stats.bootstrap import percentile_interval, quiet_nan, stratified_cluster_weights
from envduels_dagster.core.stats.discrimination import corrected_discrimination_rows, discrimination_rows
from envduels_dagster.core.stats.multiple import HOLM, holm, welch_p_value
from envduels_dagster.core.stats.ranks import kendall_tau, permutation_pvalue, rank_desc, rowwise_spearman, spearman

DEFAULT_ROUND = 0  # rankings and duels: round 0, the benchmark (DuelSettings.rankings_round)


def cluster_weights(authors: np.ndarray, n_boot: int, seed: int = 0) -> np.ndarray:
    """(n_boot, E) multiplicities: each replicate resamples every author's environments with replacement."""
    return stratified_cluster_weights(authors, n_boot, seed)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def solver_scores(panel: Panel, weights: np.ndarray, hinted: bool = False) -> np.ndarray:
    """(R, S) success on other authors' environments, averaged within domain, then across domains."""
    values = panel.p_hint if hinted else panel.p_cold
    mask = panel.peer.astype(float)
    x = np.where(panel.peer, values, 0.0)
    per_domain = []
    for domain in sorted(set(panel.domains)):
        wd = weights * (panel.domains == domain)[None, :]
        per_domain.append(_ratio(wd @ x, wd @ mask))
    stacked = np.stack(per_domain)  # (D, R, S)
    with np.errstate(invalid="ignore"), quiet_nan():
        return np.nanmean(stacked, axis=0)


def env_peer_lift(panel: Panel) -> np.ndarray:
    """(E,) mean lift an environment gives the solvers other than its author (NaN without peers)."""
    with quiet_nan():
        return np.nanmean(np.where(panel.peer, panel.lift, np.nan), axis=1)


def env_discrimination(panel: Panel) -> np.ndarray:
    """(E,) discrimination of each environment over the cold results of its peer solvers."""
    return discrimination_rows(np.where(panel.peer, panel.p_cold, np.nan))


def env_discrimination_corrected(panel: Panel) -> np.ndarray:
    """(E,) seed-noise-corrected discrimination (squared scale) of each environment's peer cold results."""
    if panel.n_seeds is None:
        return np.full(len(panel.env_ids), np.nan)
    return corrected_discrimination_rows(np.where(panel.peer, panel.p_cold, np.nan), panel.n_seeds)


def author_scores(panel: Panel, per_env: np.ndarray, weights: np.ndarray) -> tuple[list[str], np.ndarray]:
    """(R, A) weighted mean over each author's environments of a per-environment figure."""
    authors = sorted(set(panel.authors))
    onehot = (panel.authors[:, None] == np.asarray(authors, dtype=object)[None, :]).astype(float)
    defined = ~np.isnan(per_env)
    num = weights @ (onehot * np.where(defined, per_env, 0.0)[:, None])
    den = weights @ (onehot * defined[:, None])
    return authors, _ratio(num, den)


def _columns(prefix: str, point: np.ndarray, boot: np.ndarray, rank: bool, alpha: float) -> dict:
    """Point, interval and (if ``rank``) rank with its interval, as leaderboard columns."""
    lo, hi = percentile_interval(point, boot, alpha)
    cols = {prefix: point, f"{prefix}_lower": lo, f"{prefix}_upper": hi}
    if rank:
        r_point, r_boot = rank_desc(point), rank_desc(boot)
        r_lo, r_hi = percentile_interval(r_point, r_boot, alpha)
        key = prefix.replace("_score", "")
        cols.update({f"{key}_rank": r_point, f"{key}_rank_lower": r_lo, f"{key}_rank_upper": r_hi})
    return cols


def _scores(panel: Panel, weights: np.ndarray, alpha: float) -> tuple[list[tuple[list[str], dict]], dict]:
    """Leaderboard blocks (names, columns) for solver, hinted, author and design scores; plus the replicates
    the role separation needs."""
    ones = np.ones((1, len(panel.env_ids)))
    solver_boot = solver_scores(panel, weights)
    peer_lift, disc = env_peer_lift(panel), env_discrimination(panel)
    authors, hint_point = author_scores(panel, peer_lift, ones)
    _, hint_boot = author_scores(panel, peer_lift, weights)
    _, design_point = author_scores(panel, disc, ones)
    _, design_boot = author_scores(panel, disc, weights)
    corrected = env_discrimination_corrected(panel)
    _, corrected_point = author_scores(panel, corrected, ones)
    _, corrected_boot = author_scores(panel, corrected, weights)
    blocks = [
        (panel.solvers, _columns("solver_score", solver_scores(panel, ones)[0], solver_boot, True, alpha)),
        (panel.solvers, _columns("solver_hinted", solver_scores(panel, ones, hinted=True)[0],
                                 solver_scores(panel, weights, hinted=True), False, alpha)),
        (authors, _columns("author_score", hint_point[0], hint_boot, True, alpha)),
        (authors, _columns("design_score", design_point[0], design_boot, False, alpha)),
    ]
    # Added after every older column (table shapes stay stable): the seed-noise-corrected design score and
    # the t intervals over environments (core/rankings/intervals.py).
    late = [(authors, _columns("design_score_corrected", corrected_point[0], corrected_boot, False, alpha)),
            (panel.solvers, _t_columns("solver_score", _solver_t(panel, blocks[0][1]["solver_score"], alpha))),
            (authors, _t_columns("author_score", author_intervals(panel.authors, peer_lift, authors))),
            (authors, _t_columns("design_score_corrected", author_intervals(panel.authors, corrected, authors)))]
    return blocks, {"authors": authors, "solver_boot": solver_boot, "hint_boot": hint_boot, "late": late}


def _solver_t(panel: Panel, point: np.ndarray, alpha: float) -> dict:
    """Per solver: (lower, upper, reason) of its cold score, strata = (domain, author) of the environments."""
    out = {}
    for j, solver in enumerate(panel.solvers):
        values = np.where(panel.peer[:, j], panel.p_cold[:, j], np.nan)
        out[solver] = stratified_interval(float(point[j]), values, panel.domains, panel.authors, alpha)
    return out


def _t_columns(prefix: str, intervals: dict) -> dict:
    names = list(intervals)
    return {f"{prefix}_ci_lower": [intervals[n][0] for n in names], f"{prefix}_ci_upper": [intervals[n][1] for n in names],
            f"{prefix}_ci_reason": [intervals[n][2] for n in names]}


def _duel_family(duels: pd.DataFrame, alpha: float) -> dict:
    """Duels decided after Holm's control over the whole family (needs the mart's lift_diff_se, diff_df)."""
    if not len(duels) or "lift_diff_se" not in duels or "diff_df" not in duels:
        return {"n_decisive_duels_holm": np.nan, "duel_decision_control": "none (each duel at its own level)"}
    p = welch_p_value(duels["lift_diff"], duels["lift_diff_se"], duels["diff_df"])
    return {"n_decisive_duels_holm": int(np.sum(holm(p) < alpha)), "duel_decision_control": HOLM}


def _duel_record(duels: pd.DataFrame, models: list[str]) -> dict:
    """Wins, ties and losses of each model in the duel table."""
    record = {m: [0, 0, 0] for m in models}
    for a, b, outcome in duels[["model_a", "model_b", "outcome"]].itertuples(index=False) if len(duels) else []:
        if outcome == "tie":
            record[a][1] += 1
            record[b][1] += 1
        else:
            winner, loser = (a, b) if outcome == "a" else (b, a)
            record[winner][0] += 1
            record[loser][2] += 1
    return {f"duel_{kind}": [record[m][i] for m in models] for i, kind in enumerate(("wins", "ties", "losses"))}


def _role_separation(df: pd.DataFrame, panel: Panel, reps: dict, n_perm: int, seed: int, alpha: float) -> dict:
    """Spearman rho between solver rank and author rank, its permutation p and bootstrap interval."""
    both = df.dropna(subset=["solver_rank", "author_rank"])
    x, y = -both["solver_rank"].to_numpy(), -both["author_rank"].to_numpy()
    rho = spearman(x, y) if len(both) >= 2 else float("nan")
    p_value, perms = permutation_pvalue(x, y, n_perm=n_perm, seed=seed) if len(both) >= 3 else (float("nan"), 0)
    rho_lo = rho_hi = float("nan")
    if len(both) >= 3:
        s_idx = [panel.solvers.index(m) for m in both["model"]]
        a_idx = [reps["authors"].index(m) for m in both["model"]]
        rb = rowwise_spearman(reps["solver_boot"][:, s_idx], reps["hint_boot"][:, a_idx])
        lo, hi = percentile_interval(np.array([rho]), rb[:, None], alpha)
        rho_lo, rho_hi = float(lo[0]), float(hi[0])
    return {"role_rho": rho, "role_rho_lower": rho_lo, "role_rho_upper": rho_hi, "role_p_value": p_value,
            "role_n_permutations": perms, "role_n_models": len(both)}


#: Environments per author below which the role-separation interval is withheld. Its plain percentile interval
#: (no longer widened to hold the estimate) covered the population rho 0.90 / 0.91 at 3 (n = 100 / 200), 0.930 at
#: 5, 0.93 at 6, 0.95 at 12, 0.97 at 30 (benchmarks/calibration_tournament.py, docs/STATISTICS.md).
ROLE_MIN_ENVS = 5
def _sample_sizes(panel: Panel, models: list[str]) -> dict[str, list]:
    """Per model, the samples behind its figures: environments it authored (author scores, its side of the
    duels), other authors' environments it solved (solver scores), and the fewest matched seeds of those."""
    authored = pd.Series(panel.authors).value_counts()
    solved = dict(zip(panel.solvers, panel.peer.sum(axis=0).tolist(), strict=True))
    seeds: dict[str, float] = {}
    if panel.n_seeds is not None:
        for j, m in enumerate(panel.solvers):
            vals = panel.n_seeds[panel.peer[:, j], j]
            seeds[m] = float(np.nanmin(vals)) if vals.size and not np.isnan(vals).all() else float("nan")
    return {"author_n_envs": [int(authored.get(m, 0)) for m in models],
            "solver_n_envs": [int(solved.get(m, 0)) for m in models],
            "solver_min_seeds": [seeds.get(m, float("nan")) for m in models]}


def _min_envs(panel: Panel, models: list[str]) -> int:
    """Fewest environments of any of ``models`` as an author."""
    counts = pd.Series(panel.authors).value_counts()
    return int(min(counts.get(m, 0) for m in models)) if models else 0


def _role_interval_reason(n_models: int, n_envs: int) -> str | None:
    """Why the role-separation interval is withheld (None when it is published)."""
    if n_models < 3:
        return f"insufficient data: {n_models} models rank as both solver and author (at least 3)"
    if n_envs < ROLE_MIN_ENVS:
        return (f"insufficient data: an author has {n_envs} environment{'s' * (n_envs != 1)} (the role interval "
                f"needs at least {ROLE_MIN_ENVS} per author)")
    return None


def _skill_tau(df: pd.DataFrame, skill_rank: dict[str, int] | None) -> float:
    """Kendall tau between the documented skill order of simulated models and the solver ranking."""
    if not skill_rank:
        return float("nan")
    ranked = df.dropna(subset=["solver_rank"])
    ranked = ranked[ranked["model"].isin(list(skill_rank))]
    if len(ranked) < 2:
        return float("nan")
    return kendall_tau(ranked["solver_rank"], [skill_rank[m] for m in ranked["model"]])


def compute_rankings(stats: pd.DataFrame, duels: pd.DataFrame, config: RankingConfig = RankingConfig(),
                     skill_rank: dict[str, int] | None = None,
                     round_: int = DEFAULT_ROUND) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-model leaderboard (``rankings``) and one-row summary (``rankings_summary``) of round ``round_``.

    ``stats`` and ``duels`` are restricted to rows of that round when they carry a ``round`` column (the dbt
    marts do); without one they are taken to be that round already.

    ``skill_rank`` (documented order of simulated models, 1 = strongest) adds the Kendall tau between it and
    the solver ranking to the summary. ``config``: the bootstrap, permutations, prior and alpha, and whether
    uncalibrated intervals are withheld (``RankingConfig``).
    """
    n_boot, seed, alpha = config.n_boot, config.seed, config.alpha
    stats, duels = of_round(stats, round_), of_round(duels, round_)
    if len(duels):  # the mart's row order is not deterministic; the duel bootstrap draws rows by position
        duels = duels.sort_values(["model_a", "model_b"], kind="stable").reset_index(drop=True)
    panel = panel_from_stats(stats)
    weights = cluster_weights(panel.authors, n_boot, seed)
    blocks, reps = _scores(panel, weights, alpha)
    models = sorted(set(panel.solvers) | set(reps["authors"]) | set(duels.get("model_a", []))
                    | set(duels.get("model_b", [])))
    df = pd.DataFrame({"model": models})
    for names, cols in blocks:
        df = df.merge(pd.DataFrame({"model": names, **cols}), on="model", how="left")
    bt_cols, tour = tournament_columns(panel, duels, models, weights, config.bt_prior, alpha)
    late_bt = {c: bt_cols.pop(c) for c in ("bt_strength_reason", "bt_rank_lower", "bt_rank_upper")}
    pop_cols, pop = population_columns(panel, duel_models(duels), models, config.bt_prior, alpha)
    late_bt.update(pop_cols)
    # Strengths equal up to the fit's own noise tie (average rank): the optimizer's last bits differ between numpy
    # and scipy releases, and ranked raw they flipped the order of two exactly symmetric models (measured: numpy
    # 2.4.6 and scipy 1.17.1 swapped ranks 2 and 3 of the demo fixture; strengths differed by 1e-15).
    bt_cols["bt_rank"] = rank_desc(np.round(np.asarray(bt_cols["bt_strength"], dtype=float), 9))
    for name, values in {**bt_cols, **_duel_record(duels, models)}.items():
        df[name] = values
    if skill_rank:
        # the documented order among the ranked models, 1..k (a registry using 3 of the 5 profiles ranked
        # 5th otherwise, outside 1..n: ranks_within_1_to_n withheld the rankings, issue 33 item 7)
        within = {m: i for i, m in enumerate(sorted((m for m in models if m in skill_rank), key=skill_rank.get), 1)}
        df["sim_skill_rank"] = [within.get(m) for m in models]
    for names, cols in reps["late"]:
        df = df.merge(pd.DataFrame({"model": names, **cols}), on="model", how="left")
    summary = pd.DataFrame([{
        "n_models": len(models), "n_envs": len(panel.env_ids), "n_boot": n_boot,
        "n_duels": len(duels), "n_decisive_duels": int((duels["outcome"] != "tie").sum()) if len(duels) else 0,
        **{k: tour[k] for k in ("cyclic_triads", "cyclic_triads_max", "kendall_zeta")},
        **_role_separation(df, panel, reps, config.n_perm, seed, alpha),
        "skill_order_kendall_tau": _skill_tau(df, skill_rank),
        # added after the older columns
        "bt_converged": tour["bt_converged"], "bt_iterations": tour["bt_iterations"],
        **{k: tour[k] for k in ("tournament_complete", "n_triads", "n_triads_complete")},
        **_duel_family(duels, alpha),
        "round": round_,  # added after the older columns, like the ones above
    }])
    df["round"] = round_  # older columns keep their places: later ones are appended after it
    for name, values in late_bt.items():
        df[name] = values
    if config.withhold_uncalibrated:
        withhold_uncalibrated_bootstrap(df, _min_envs(panel, sorted(set(panel.authors))))
        withhold_uncalibrated_t(df, pd.Series(panel.authors).value_counts().to_dict())
    for name, values in _sample_sizes(panel, list(df["model"])).items():
        df[name] = values
    later = {k: v for k, v in {**tour, **pop}.items() if k not in summary.columns}
    ranked = df.dropna(subset=["solver_rank", "author_rank"])["model"].tolist()
    role_envs = _min_envs(panel, ranked)
    role = _role_interval_reason(len(ranked), role_envs)
    if role:
        summary[["role_rho_lower", "role_rho_upper"]] = np.nan
    for name, value in {**later, "role_rho_reason": role, "role_rho_n_boot": n_boot,
                        "role_min_envs_per_author": role_envs}.items():
        summary[name] = [value]
    return df.sort_values(["solver_rank", "model"], na_position="last").reset_index(drop=True), summary


def of_round(df: pd.DataFrame, round_: int) -> pd.DataFrame:
    """The rows of one round of a per-round mart (all rows when it has no ``round`` column)."""
    if "round" not in df.columns:
        return df
    return df[df["round"].fillna(0).astype(int) == round_].reset_index(drop=True)
