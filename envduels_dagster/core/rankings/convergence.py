"""Design convergence: do different authors write structurally similar environments? (DESIGN §6)

Why AST shapes: two environments built on the same design (a grid to walk, a code to deduce) share the
shape of their syntax tree even when names, constants and wording differ, so we compare the sequences of
AST node types, not the text. Each source becomes a bag of n-grams of its pre-order node-type sequence;
similarity is the cosine of their tf-idf vectors (sublinear counts, smoothed idf).

Against what: a **label-permutation null, stratified by environment family**. Shuffling which author wrote which
environment *within each family* (each author's count per family kept) gives the similarity expected if
authorship did not matter beyond which families the author wrote in. Unstratified, two authors who merely
write in the same families (same templates) came out "converged" and the overall row "distinct styles";
stratified, only similarity beyond the family mix counts. ``strata`` picks the column (``"family"`` when
present, else ``"domain"``, else none); the table names it (column ``null_strata``). For each pair of authors we report the
mean similarity between their environments, the null's mean and 95% range, a z-score and a one-sided
p-value for "more similar than chance" (convergence of the two authors), and ``p_value_holm``, Holm's
adjustment over the family of author pairs (many pairs are tested at once); the overall row compares all
cross-author pairs with the null (an observed value below the null means authors have their own styles).
Clusters: environments linked by similarity >= threshold (single linkage); those spanning several authors
are the designs authors converged on. Pure Python/numpy, no Dagster.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from envduels_dagster.core.stats.multiple import holm
from envduels_dagster.core.stats.similarity import NGRAM, shape_ngrams, shape_tokens, similarity_matrix

__all__ = ["NGRAM", "THRESHOLD", "design_convergence", "shape_ngrams", "shape_tokens", "similarity_matrix"]

THRESHOLD = 0.9


def _block_means(sim0: np.ndarray, labels: np.ndarray, n_groups: int) -> np.ndarray:
    """(G, G) mean off-diagonal similarity between groups; sim0 has a zero diagonal."""
    onehot = np.zeros((labels.size, n_groups))
    onehot[np.arange(labels.size), labels] = 1.0
    sums = onehot.T @ sim0 @ onehot
    sizes = onehot.sum(axis=0)
    pairs = np.outer(sizes, sizes) - np.diag(sizes)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pairs > 0, sums / np.where(pairs > 0, pairs, 1), np.nan)


def _cross_mean(sim0: np.ndarray, labels: np.ndarray) -> float:
    cross = labels[:, None] != labels[None, :]
    return float(sim0[cross].mean()) if cross.any() else float("nan")


def clusters(sim: np.ndarray, threshold: float = THRESHOLD) -> np.ndarray:
    """Connected components of the graph with an edge where similarity >= threshold (single linkage)."""
    n = sim.shape[0]
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in zip(*np.nonzero(np.triu(sim >= threshold, k=1))):
        parent[find(int(i))] = find(int(j))
    roots = [find(i) for i in range(n)]
    relabel = {r: k for k, r in enumerate(dict.fromkeys(roots))}
    return np.array([relabel[r] for r in roots], dtype=int)


def stratified_permutation(rng: np.random.Generator, labels: np.ndarray, strata: np.ndarray | None) -> np.ndarray:
    """``labels`` shuffled within each stratum (all together when ``strata`` is None)."""
    if strata is None:
        return rng.permutation(labels)
    out = labels.copy()
    for s in np.unique(strata):
        idx = np.flatnonzero(strata == s)
        out[idx] = labels[rng.permutation(idx)]
    return out


def strata_column(envs: pd.DataFrame, strata: str | None = "auto") -> str | None:
    if strata != "auto":
        return strata
    for c in ("family", "domain"):
        if c in envs and envs[c].notna().any():
            return c
    return None


def design_convergence(envs: pd.DataFrame, n: int = NGRAM, n_perm: int = 1000, threshold: float = THRESHOLD,
                       seed: int = 0, alpha: float = 0.05,
                       strata: str | None = "auto") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per author-pair table, cluster membership table) from rows with env_id, author, source (+ domain, family).

    The first table has one ``overall`` row (all cross-author pairs), one ``within`` row per author and one
    ``pair`` row per pair of authors. ``strata``: the column the null permutes within ("auto": family, else
    domain; None: unstratified).
    """
    cols = ["scope", "author_a", "author_b", "n_env_pairs", "similarity", "null_mean", "null_lower", "null_upper",
            "z_score", "p_value"]
    ccols = ["cluster_id", "env_id", "author", "domain", "family", "cluster_size", "n_authors", "authors",
             "mean_similarity"]
    envs = envs.sort_values(["author", "env_id"]).reset_index(drop=True)
    if len(envs) < 2:
        return pd.DataFrame(columns=[*cols, "p_value_holm", "null_strata"]), pd.DataFrame(columns=ccols)
    sim = similarity_matrix(envs["source"].fillna("").tolist(), n)
    sim0 = sim.copy()
    np.fill_diagonal(sim0, 0.0)
    authors = sorted(envs["author"].unique())
    labels = envs["author"].map({a: i for i, a in enumerate(authors)}).to_numpy()
    observed = _block_means(sim0, labels, len(authors))
    observed_cross = _cross_mean(sim0, labels)

    stratum = strata_column(envs, strata)
    groups = None if stratum is None else envs[stratum].fillna("(none)").astype(str).to_numpy()
    rng = np.random.default_rng(seed)
    null = np.empty((n_perm, len(authors), len(authors)))
    null_cross = np.empty(n_perm)
    for r in range(n_perm):
        perm = stratified_permutation(rng, labels, groups)
        null[r] = _block_means(sim0, perm, len(authors))
        null_cross[r] = _cross_mean(sim0, perm)

    def row(scope: str, a, b, n_pairs: int, obs: float, dist: np.ndarray) -> dict:
        dist = dist[~np.isnan(dist)]
        if dist.size == 0 or np.isnan(obs):
            return {"scope": scope, "author_a": a, "author_b": b, "n_env_pairs": n_pairs, "similarity": obs,
                    "null_mean": np.nan, "null_lower": np.nan, "null_upper": np.nan, "z_score": np.nan,
                    "p_value": np.nan}
        sd = dist.std()
        return {"scope": scope, "author_a": a, "author_b": b, "n_env_pairs": n_pairs, "similarity": obs,
                "null_mean": float(dist.mean()), "null_lower": float(np.quantile(dist, alpha / 2)),
                "null_upper": float(np.quantile(dist, 1 - alpha / 2)),
                "z_score": float((obs - dist.mean()) / sd) if sd > 0 else np.nan,
                "p_value": float((1 + np.sum(dist >= obs - 1e-12)) / (1 + dist.size))}

    sizes = np.bincount(labels, minlength=len(authors))
    cross_pairs = int(len(labels) ** 2 - np.sum(sizes ** 2))
    rows = [row("overall", None, None, cross_pairs // 2, observed_cross, null_cross)]
    for i, a in enumerate(authors):
        for j in range(i, len(authors)):
            n_pairs = int(sizes[i] * (sizes[i] - 1) // 2) if i == j else int(sizes[i] * sizes[j])
            rows.append(row("within" if i == j else "pair", a, authors[j], n_pairs, float(observed[i, j]),
                            null[:, i, j]))
    table = pd.DataFrame(rows, columns=cols)
    pairs = (table["scope"] == "pair").to_numpy()
    table["p_value_holm"] = np.nan
    table.loc[pairs, "p_value_holm"] = holm(table.loc[pairs, "p_value"].to_numpy(dtype=float))
    table["null_strata"] = f"author labels permuted within {stratum}" if stratum else "unstratified"

    comp = clusters(sim, threshold)
    members = []
    for cid in np.unique(comp):
        idx = np.flatnonzero(comp == cid)
        span = sorted(envs.loc[idx, "author"].unique())
        if len(idx) < 2:
            continue
        block = sim[np.ix_(idx, idx)]
        mean_sim = float((block.sum() - np.trace(block)) / (len(idx) * (len(idx) - 1)))
        for e in idx:
            members.append({"cluster_id": int(cid), "env_id": envs.at[e, "env_id"], "author": envs.at[e, "author"],
                            "domain": envs.at[e, "domain"] if "domain" in envs else None,
                            "family": envs.at[e, "family"] if "family" in envs else None,
                            "cluster_size": len(idx), "n_authors": len(span), "authors": ", ".join(span),
                            "mean_similarity": mean_sim})
    clustered = pd.DataFrame(members, columns=ccols)
    if len(clustered):  # number clusters by size, largest first
        order = (clustered.groupby("cluster_id")["cluster_size"].first().sort_values(ascending=False, kind="stable"))
        clustered["cluster_id"] = clustered["cluster_id"].map({c: k for k, c in enumerate(order.index, 1)})
        clustered = clustered.sort_values(["cluster_id", "author", "env_id"]).reset_index(drop=True)
    return table, clustered
