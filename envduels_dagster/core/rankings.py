"""Rankings with intervals: solvers, authors, Bradley-Terry on duels, transitivity, role separation (DESIGN §6).

Pure numpy/pandas; no Dagster. Inputs are the dbt marts:
``env_solver_stats`` (one row per environment x solver over matched seeds) and ``duels``.

Uncertainty:
* Solver and author scores get intervals from a **cluster bootstrap over environments**: each replicate
  resamples every author's environments with replacement (stratified by author, so each author keeps its
  number of environments); an environment carries all of its solvers' matched-seed results, so seeds stay
  paired. Ranks are recomputed per replicate, giving rank intervals too.
* The Bradley-Terry fit uses the duel outcomes (1, 1/2 for a tie, 0); its intervals come from resampling
  the duels with replacement. A small prior (``prior`` virtual tied games per pair) keeps strengths finite
  when a model wins or loses everything (with ``prior=0`` the fit is the plain maximum-likelihood one).
* Transitivity counts cyclic triads, c = C(n,3) - sum_i C(w_i, 2), on the duel tournament. A tied duel
  counts half a win to each side; c is then the expected number of cyclic triads when every tie is broken
  by a fair coin (each tie adds 1/8 to the subtracted sum: Var of a coin flip / 2). Kendall's
  zeta = 1 - c / c_max with c_max = (n^3 - n)/24 (n odd) or (n^3 - 4n)/24 (n even).
* Role separation: Spearman correlation between solver rank and author rank, with a permutation p-value
  (exact over all permutations up to 8 models) and a bootstrap interval from the environment replicates.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

ALPHA = 0.05


# --------------------------------------------------------------------------------------------- panel


@dataclass
class Panel:
    """Environment x solver matrices (NaN where the solver has no matched seed on the environment)."""

    env_ids: np.ndarray
    authors: np.ndarray  # author of each environment
    domains: np.ndarray
    solvers: list[str]
    p_cold: np.ndarray  # (E, S)
    p_hint: np.ndarray
    lift: np.ndarray

    def __post_init__(self) -> None:
        #: (E, S) True where the solver has results on the environment and did not write it.
        self.peer = ~np.isnan(self.p_cold) & (self.authors[:, None] != np.asarray(self.solvers, dtype=object)[None, :])


def panel_from_stats(stats: pd.DataFrame) -> Panel:
    stats = stats.copy()
    if "domain" not in stats:
        stats["domain"] = "unknown"
    stats["domain"] = stats["domain"].fillna("unknown")
    envs = stats.groupby("env_id", sort=True).agg(author=("author", "first"), domain=("domain", "first"))
    solvers = sorted(stats["solver"].unique())

    def matrix(col: str) -> np.ndarray:
        m = stats.pivot_table(index="env_id", columns="solver", values=col, aggfunc="first")
        return m.reindex(index=envs.index, columns=solvers).to_numpy(dtype=float)

    return Panel(env_ids=envs.index.to_numpy(), authors=envs["author"].to_numpy(dtype=object),
                 domains=envs["domain"].to_numpy(dtype=object), solvers=solvers,
                 p_cold=matrix("p_cold"), p_hint=matrix("p_hint"), lift=matrix("lift"))


def cluster_weights(authors: np.ndarray, n_boot: int, seed: int = 0) -> np.ndarray:
    """(n_boot, E) multiplicities: each replicate resamples every author's environments with replacement."""
    rng = np.random.default_rng(seed)
    w = np.zeros((n_boot, len(authors)))
    for author in sorted(set(authors)):
        idx = np.flatnonzero(authors == author)
        w[:, idx] = rng.multinomial(len(idx), np.full(len(idx), 1.0 / len(idx)), size=n_boot)
    return w


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
    with np.errstate(invalid="ignore"), _quiet_nanmean():
        return np.nanmean(stacked, axis=0)


def env_peer_lift(panel: Panel) -> np.ndarray:
    """(E,) mean lift an environment gives the solvers other than its author (NaN without peers)."""
    peer = panel.peer
    with _quiet_nanmean():
        return np.nanmean(np.where(peer, panel.lift, np.nan), axis=1)


def discrimination(results: np.ndarray) -> float:
    """Peer-panel discrimination sum_{i<j} |r_i - r_j| / floor(n^2/4) of one environment (NaN if n < 2)."""
    r = np.sort(np.asarray(results, dtype=float)[~np.isnan(results)])
    n = r.size
    if n < 2:
        return float("nan")
    k = np.arange(1, n + 1)
    return float((r * (2 * k - n - 1)).sum() / (n * n // 4))


def env_discrimination(panel: Panel) -> np.ndarray:
    """(E,) discrimination of each environment over the cold results of its peer solvers (vectorised
    :func:`discrimination`: NaNs sort last, so the k-th smallest of n results gets weight 2k - n - 1)."""
    r = np.sort(np.where(panel.peer, panel.p_cold, np.nan), axis=1)
    n = panel.peer.sum(axis=1)
    k = np.arange(1, r.shape[1] + 1)[None, :]
    weights = np.where(k <= n[:, None], 2 * k - n[:, None] - 1, 0)
    total = np.nansum(r * weights, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n >= 2, total / np.maximum(n * n // 4, 1), np.nan)


def author_scores(panel: Panel, per_env: np.ndarray, weights: np.ndarray) -> tuple[list[str], np.ndarray]:
    """(R, A) weighted mean over each author's environments of a per-environment figure."""
    authors = sorted(set(panel.authors))
    onehot = (panel.authors[:, None] == np.asarray(authors, dtype=object)[None, :]).astype(float)
    defined = ~np.isnan(per_env)
    num = weights @ (onehot * np.where(defined, per_env, 0.0)[:, None])
    den = weights @ (onehot * defined[:, None])
    return authors, _ratio(num, den)


# --------------------------------------------------------------------------------------------- ranks


def rank_desc(scores: np.ndarray) -> np.ndarray:
    """Ranks along the last axis, 1 = highest score, ties share their average rank, NaN stays NaN."""
    scores = np.asarray(scores, dtype=float)
    flat = np.atleast_2d(np.where(np.isnan(scores), -np.inf, scores))
    rows, n = flat.shape
    if n == 0:
        return scores.copy()
    order = np.argsort(-flat, axis=-1, kind="stable")
    ordered = np.take_along_axis(-flat, order, axis=-1)
    with np.errstate(invalid="ignore"):  # inf - inf between missing scores: they are masked below
        new_run = np.concatenate([np.ones((rows, 1), bool), np.diff(ordered, axis=-1) != 0], axis=-1)
    run = np.cumsum(new_run, axis=-1) - 1 + (np.arange(rows) * n)[:, None]
    positions = np.broadcast_to(np.arange(1, n + 1, dtype=float), (rows, n))
    sums = np.bincount(run.ravel(), weights=positions.ravel(), minlength=rows * n)
    counts = np.bincount(run.ravel(), minlength=rows * n)
    ranks = np.empty_like(flat)
    np.put_along_axis(ranks, order, (sums[run] / counts[run]), axis=-1)
    ranks = ranks.reshape(scores.shape)
    return np.where(np.isnan(scores), np.nan, ranks)


def percentile_interval(estimate: np.ndarray, replicates: np.ndarray, alpha: float = ALPHA
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval over axis 0, widened if needed so that it contains the estimate."""
    with np.errstate(invalid="ignore"), _quiet_nanmean():
        lo = np.nanquantile(replicates, alpha / 2, axis=0)
        hi = np.nanquantile(replicates, 1 - alpha / 2, axis=0)
    return np.fmin(lo, estimate), np.fmax(hi, estimate)


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho (Pearson correlation of average ranks)."""
    rx, ry = rank_desc(np.asarray(x, float)), rank_desc(np.asarray(y, float))
    if rx.size < 2 or np.std(rx) == 0 or np.std(ry) == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def _rowwise_spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row of x with the same row of y (NaN where a row is constant)."""
    rx, ry = rank_desc(x), rank_desc(y)
    rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
    denom = np.sqrt((rx ** 2).sum(axis=1) * (ry ** 2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (rx * ry).sum(axis=1) / np.where(denom > 0, denom, 1), np.nan)


def kendall_tau(x, y) -> float:
    """Kendall's tau-b (ties in either ranking handled as in tau-b)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    iu = np.triu_indices(x.size, k=1)
    sx = np.sign(x[:, None] - x[None, :])[iu]
    sy = np.sign(y[:, None] - y[None, :])[iu]
    denom = math.sqrt(float(np.sum(sx != 0)) * float(np.sum(sy != 0)))
    return float(np.sum(sx * sy) / denom) if denom else float("nan")


def permutation_pvalue(x, y, n_perm: int = 10000, seed: int = 0, exact_up_to: int = 8) -> tuple[float, int]:
    """Two-sided p-value of Spearman's rho against permutations of y: (p, number of permutations used).

    Exact (all n! orderings) up to ``exact_up_to`` items, else ``n_perm`` random permutations with the
    observed ordering counted once ((1 + hits) / (1 + n_perm))."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = x.size
    observed = spearman(x, y)
    if n < 3 or math.isnan(observed):
        return float("nan"), 0
    rx, ry = rank_desc(x), rank_desc(y)
    rx = (rx - rx.mean()) / np.linalg.norm(rx - rx.mean())
    ryc = ry - ry.mean()
    ryc = ryc / np.linalg.norm(ryc)
    if n <= exact_up_to:
        perms = np.array(list(itertools.permutations(range(n))))
        rhos = ryc[perms] @ rx
        return float(np.mean(np.abs(rhos) >= abs(observed) - 1e-12)), len(perms)
    rng = np.random.default_rng(seed)
    perms = np.argsort(rng.random((n_perm, n)), axis=1)
    rhos = ryc[perms] @ rx
    return float((1 + np.sum(np.abs(rhos) >= abs(observed) - 1e-12)) / (1 + n_perm)), n_perm


# ----------------------------------------------------------------------------------- Bradley-Terry


def wins_matrix(duels: pd.DataFrame, models: list[str]) -> np.ndarray:
    """wins[i, j] = points of model i against model j (1 a win, 1/2 a tie) from rows model_a, model_b, score_a."""
    pos = {m: i for i, m in enumerate(models)}
    a = np.array([pos[m] for m in duels["model_a"]], dtype=int)
    b = np.array([pos[m] for m in duels["model_b"]], dtype=int)
    return _wins(a, b, duels["score_a"].to_numpy(dtype=float), len(models))


def _wins(a: np.ndarray, b: np.ndarray, score: np.ndarray, n: int) -> np.ndarray:
    wins = np.zeros((n, n))
    np.add.at(wins, (a, b), score)
    np.add.at(wins, (b, a), 1.0 - score)
    return wins


def bradley_terry(wins: np.ndarray, prior: float = 0.0, max_iter: int = 200, tol: float = 1e-12) -> np.ndarray:
    """Log-strengths theta (mean 0) maximising the Bradley-Terry likelihood, P(i beats j) = 1/(1+e^(theta_j-theta_i)).

    ``wins[i, j]`` may be fractional (ties as halves). ``prior`` adds that many virtual tied games to every
    pair (a symmetric pseudo-count that keeps the estimate finite). Newton's method on the concave
    log-likelihood, the sum-to-zero constraint handled by adding 11'/n to the Hessian.
    """
    w = np.asarray(wins, dtype=float).copy()
    n = w.shape[0]
    if n < 2:
        return np.zeros(n)
    off = ~np.eye(n, dtype=bool)
    w[off] += prior / 2.0
    games = w + w.T
    won = w.sum(axis=1)
    if np.any(won <= 0):
        raise ValueError("a model without any win has no finite Bradley-Terry strength; use prior > 0")
    theta = np.zeros(n)
    ones = np.full((n, n), 1.0 / n)

    def loglik(t: np.ndarray) -> float:
        d = t[:, None] - t[None, :]
        return float(np.sum(w * -np.logaddexp(0.0, -d)))

    current = loglik(theta)
    for _ in range(max_iter):
        prob = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
        grad = won - np.sum(games * prob, axis=1)
        info = games * prob * (1.0 - prob)
        hess = np.diag(info.sum(axis=1)) - info + ones
        step = np.linalg.solve(hess, grad)
        scale = 1.0
        while True:  # step halving keeps every iteration an ascent step
            candidate = theta + scale * step
            value = loglik(candidate)
            if value >= current - 1e-15 or scale < 1e-8:
                break
            scale /= 2
        theta, current = candidate - candidate.mean(), value
        if np.max(np.abs(scale * step)) < tol or np.max(np.abs(grad)) < tol:
            break
    return theta - theta.mean()


def bradley_terry_bootstrap(duels: pd.DataFrame, models: list[str], n_boot: int = 1000, prior: float = 0.5,
                            seed: int = 0) -> np.ndarray:
    """(n_boot, M) log-strengths refitted on duels resampled with replacement."""
    rng = np.random.default_rng(seed)
    out = np.full((n_boot, len(models)), np.nan)
    if duels.empty:
        return out
    pos = {m: i for i, m in enumerate(models)}
    a = np.array([pos[m] for m in duels["model_a"]], dtype=int)
    b = np.array([pos[m] for m in duels["model_b"]], dtype=int)
    score = duels["score_a"].to_numpy(dtype=float)
    for r in range(n_boot):
        pick = rng.integers(0, len(duels), size=len(duels))
        out[r] = bradley_terry(_wins(a[pick], b[pick], score[pick], len(models)), prior=prior)
    return out


# ------------------------------------------------------------------------------------- transitivity


def cyclic_triads(wins: np.ndarray) -> tuple[float, float, float]:
    """(c, c_max, zeta) of a round-robin tournament given points wins[i, j] (ties as halves).

    c = C(n,3) - sum_i [C(w_i, 2) + t_i/8] where w_i is i's points and t_i its number of tied games;
    without ties this is Kendall & Babington Smith's count of cyclic triads.
    """
    wins = np.asarray(wins, dtype=float)
    n = wins.shape[0]
    if n < 3:
        return 0.0, 0.0, float("nan")
    points = wins.sum(axis=1)
    ties = np.sum(np.isclose(wins, 0.5) & np.isclose(wins.T, 0.5), axis=1)
    c = math.comb(n, 3) - float(np.sum(points * (points - 1) / 2 + ties / 8))
    c_max = (n ** 3 - n) / 24 if n % 2 else (n ** 3 - 4 * n) / 24
    c = max(c, 0.0)
    return c, c_max, 1.0 - c / c_max


# --------------------------------------------------------------------------------------------- all


def compute_rankings(stats: pd.DataFrame, duels: pd.DataFrame, n_boot: int = 1000, seed: int = 0,
                     bt_prior: float = 0.5, n_perm: int = 10000, alpha: float = ALPHA,
                     skill_rank: dict[str, int] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-model leaderboard (``rankings``) and one-row summary (``rankings_summary``).

    ``skill_rank`` (documented order of simulated models, 1 = strongest) adds the Kendall tau between it and
    the solver ranking to the summary.
    """
    panel = panel_from_stats(stats)
    weights = cluster_weights(panel.authors, n_boot, seed)
    ones = np.ones((1, len(panel.env_ids)))

    solver_point = solver_scores(panel, ones)[0]
    solver_boot = solver_scores(panel, weights)
    hinted_point = solver_scores(panel, ones, hinted=True)[0]
    hinted_boot = solver_scores(panel, weights, hinted=True)
    peer_lift = env_peer_lift(panel)
    authors, hint_point = author_scores(panel, peer_lift, ones)
    _, hint_boot = author_scores(panel, peer_lift, weights)
    disc = env_discrimination(panel)
    _, design_point = author_scores(panel, disc, ones)
    _, design_boot = author_scores(panel, disc, weights)
    hint_point, design_point = hint_point[0], design_point[0]

    models = sorted(set(panel.solvers) | set(authors) | set(duels.get("model_a", [])) | set(duels.get("model_b", [])))
    df = pd.DataFrame({"model": models})

    def put(prefix: str, names: list[str], point: np.ndarray, boot: np.ndarray, rank: bool) -> None:
        nonlocal df
        lo, hi = percentile_interval(point, boot, alpha)
        cols = {prefix: point, f"{prefix}_lower": lo, f"{prefix}_upper": hi}
        if rank:
            r_point, r_boot = rank_desc(point), rank_desc(boot)
            r_lo, r_hi = percentile_interval(r_point, r_boot, alpha)
            key = prefix.replace("_score", "")
            cols.update({f"{key}_rank": r_point, f"{key}_rank_lower": r_lo, f"{key}_rank_upper": r_hi})
        df = df.merge(pd.DataFrame({"model": names, **cols}), on="model", how="left")

    put("solver_score", panel.solvers, solver_point, solver_boot, rank=True)
    put("solver_hinted", panel.solvers, hinted_point, hinted_boot, rank=False)
    put("author_score", authors, hint_point, hint_boot, rank=True)
    put("design_score", authors, design_point, design_boot, rank=False)

    # Bradley-Terry on the duels, and the duel record.
    wins = wins_matrix(duels, models) if len(duels) else np.zeros((len(models), len(models)))
    in_duels = sorted(set(duels.get("model_a", [])) | set(duels.get("model_b", [])))
    sub = [models.index(m) for m in in_duels]
    theta = np.full(len(models), np.nan)
    theta_lo = np.full(len(models), np.nan)
    theta_hi = np.full(len(models), np.nan)
    if len(in_duels) >= 2:
        point = bradley_terry(wins[np.ix_(sub, sub)], prior=bt_prior)
        boot = bradley_terry_bootstrap(duels, in_duels, n_boot=n_boot, prior=bt_prior, seed=seed)
        lo, hi = percentile_interval(point, boot, alpha)
        theta[sub], theta_lo[sub], theta_hi[sub] = point, lo, hi
    df["bt_strength"], df["bt_strength_lower"], df["bt_strength_upper"] = theta, theta_lo, theta_hi
    df["bt_rank"] = rank_desc(theta)
    record = {m: [0, 0, 0] for m in models}
    for a, b, outcome in duels[["model_a", "model_b", "outcome"]].itertuples(index=False) if len(duels) else []:
        if outcome == "tie":
            record[a][1] += 1
            record[b][1] += 1
        else:
            winner, loser = (a, b) if outcome == "a" else (b, a)
            record[winner][0] += 1
            record[loser][2] += 1
    df["duel_wins"] = [record[m][0] for m in models]
    df["duel_ties"] = [record[m][1] for m in models]
    df["duel_losses"] = [record[m][2] for m in models]
    if skill_rank:
        df["sim_skill_rank"] = [skill_rank.get(m) for m in models]

    # Transitivity of the duel tournament.
    c, c_max, zeta = cyclic_triads(wins[np.ix_(sub, sub)]) if len(sub) else (0.0, 0.0, float("nan"))

    # Role separation: solver rank vs author rank, for models ranked in both roles.
    both = df.dropna(subset=["solver_rank", "author_rank"])
    rho = spearman(-both["solver_rank"].to_numpy(), -both["author_rank"].to_numpy()) if len(both) >= 2 else float("nan")
    p_value, perms = permutation_pvalue(-both["solver_rank"].to_numpy(), -both["author_rank"].to_numpy(),
                                        n_perm=n_perm, seed=seed) if len(both) >= 3 else (float("nan"), 0)
    rho_lo = rho_hi = float("nan")
    if len(both) >= 3:
        s_idx = [panel.solvers.index(m) for m in both["model"]]
        a_idx = [authors.index(m) for m in both["model"]]
        rb = _rowwise_spearman(solver_boot[:, s_idx], hint_boot[:, a_idx])
        lo, hi = percentile_interval(np.array([rho]), rb[:, None], alpha)
        rho_lo, rho_hi = float(lo[0]), float(hi[0])

    tau = float("nan")
    if skill_rank:
        ranked = df.dropna(subset=["solver_rank"])
        ranked = ranked[ranked["model"].isin(list(skill_rank))]
        if len(ranked) >= 2:
            tau = kendall_tau(ranked["solver_rank"], [skill_rank[m] for m in ranked["model"]])

    summary = pd.DataFrame([{
        "n_models": len(models), "n_envs": len(panel.env_ids), "n_boot": n_boot,
        "n_duels": len(duels), "n_decisive_duels": int((duels["outcome"] != "tie").sum()) if len(duels) else 0,
        "cyclic_triads": c, "cyclic_triads_max": c_max, "kendall_zeta": zeta,
        "role_rho": rho, "role_rho_lower": rho_lo, "role_rho_upper": rho_hi,
        "role_p_value": p_value, "role_n_permutations": perms, "role_n_models": len(both),
        "skill_order_kendall_tau": tau,
    }])
    return df.sort_values(["solver_rank", "model"], na_position="last").reset_index(drop=True), summary


class _quiet_nanmean:
    """Silence numpy's 'Mean of empty slice' / 'All-NaN slice' warnings (NaN is the intended answer)."""

    def __enter__(self):
        import warnings

        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", category=RuntimeWarning)

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)
