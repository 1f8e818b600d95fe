"""Lift -> learning: does the lift an author's environments give a learner predict the gain
from training on them, measured on held-out environments?

For each author a: train the learner on its training-set environments from a (a
``trainer`` callable turns environments into a gateway for the trained model; the
simulated models provide one), then compare cold success before and after on a's
*held-out* environments (written for the study, never trained on). The study
correlates gain with lift across (learner, author) rows: Spearman's rho, and a permutation p-value that
respects the crossed design (rows share learners *and* authors): the partial rank correlation beyond learner
and author main effects with Freedman-Lane permutations (``core.stats.crossed``; the within-learner shuffle
it replaces, ``stratified_permutation_pvalue``, is published beside it for comparison). Rows whose
author gave the learner no training environment measure nothing about training and are left out
(they used to enter with gain 0).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np
import pandas as pd

from envduels_dagster.core.models.types import ChatGateway
from envduels_dagster.core.play.episode import PlayConfig, play_episode
from envduels_dagster.core.protocol import EnvironmentSpec
from envduels_dagster.core.sandbox import SandboxLimits
from envduels_dagster.core.stats.crossed import METHOD, crossed_permutation_pvalue
from envduels_dagster.core.stats.ranks import spearman, stratified_permutation_pvalue

COLUMNS = ["learner", "author", "lift", "n_train_envs", "n_heldout_envs", "cold_before", "cold_after", "gain"]


async def cold_success(gateway: ChatGateway, model_name: str, envs: list[EnvironmentSpec], limits: SandboxLimits | None,
                       concurrency: int = 8) -> float:
    sem = asyncio.Semaphore(concurrency)

    async def one(env, seed):
        async with sem:
            return await play_episode(gateway, model_name, env, seed, "cold", PlayConfig(limits=limits))

    recs = await asyncio.gather(*(one(e, s) for e in envs if e.valid for s in e.benchmark_seeds))
    done = [r for r in recs if r.status != "incomplete"]
    return float(np.mean([r.status == "success" for r in done])) if done else float("nan")


async def study_learner(learner: str, base_gateway: ChatGateway, trainer: Callable[[list[EnvironmentSpec]], ChatGateway],
                        lift_by_author: dict[str, float], train_by_author: dict[str, list[EnvironmentSpec]],
                        heldout_by_author: dict[str, list[EnvironmentSpec]],
                        limits: SandboxLimits | None = None) -> pd.DataFrame:
    rows = []
    for author, heldout in heldout_by_author.items():
        if author == learner or not any(e.valid for e in heldout):
            continue
        train = train_by_author.get(author, [])
        before = await cold_success(base_gateway, learner, heldout, limits)
        after = await cold_success(trainer(train), learner, heldout, limits) if train else before
        rows.append({"learner": learner, "author": author, "lift": lift_by_author.get(author, np.nan),
                     "n_train_envs": len(train), "n_heldout_envs": sum(e.valid for e in heldout),
                     "cold_before": before, "cold_after": after, "gain": after - before})
    return pd.DataFrame(rows, columns=COLUMNS)


def studied_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The (learner, author) rows the lift -> learning figures use: trained on something, with a lift and a gain."""
    ok = df.dropna(subset=["lift", "gain"])
    return ok[ok["n_train_envs"] > 0]


def correlate(df: pd.DataFrame) -> tuple[float, float, int]:
    """Spearman rho between lift and gain over the (learner, author) rows that trained on something, the
    crossed-design permutation p (``core.stats.crossed``: association beyond learner and author effects;
    NaN when the rows leave too few residual degrees of freedom) and the number of rows used."""
    ok = studied_rows(df)
    if len(ok) < 3:
        return float("nan"), float("nan"), len(ok)
    _, p, _, _ = crossed_permutation_pvalue(ok["lift"].to_numpy(float), ok["gain"].to_numpy(float),
                                            ok["learner"].to_numpy(object), ok["author"].to_numpy(object))
    return spearman(ok["lift"].to_numpy(float), ok["gain"].to_numpy(float)), p, len(ok)


def correlation_summary(df: pd.DataFrame) -> dict[str, float | int | str]:
    """What the ``lift_learning`` asset publishes: rho, the crossed p and its method, the partial rho it tests,
    the within-learner p it replaced (for comparison), sizes, and why the p is withheld when it is."""
    ok = studied_rows(df)
    rho, p, n = correlate(df)
    partial = reason = None
    p_learner = float("nan")
    if n >= 3:
        x, y = ok["lift"].to_numpy(float), ok["gain"].to_numpy(float)
        partial, _, _, reason = crossed_permutation_pvalue(x, y, ok["learner"].to_numpy(object),
                                                           ok["author"].to_numpy(object))
        p_learner = stratified_permutation_pvalue(x, y, ok["learner"].to_numpy(object))[1]
    else:
        reason = f"insufficient data: {n} rows trained on something (the test needs at least 3)"
    return {"spearman_lift_vs_gain": rho, "permutation_p": p, "permutation_method": METHOD,
            "partial_rho_lift_vs_gain": float("nan") if partial is None else partial,
            "permutation_p_reason": reason or "", "permutation_p_within_learner_only": p_learner,
            "n_pairs": n, "n_learners": int(ok["learner"].nunique()), "n_authors": int(ok["author"].nunique())}
