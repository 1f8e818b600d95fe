"""Authoring progress across co-evolution rounds: does an author's hardened child beat its parent?

Why a module of its own: the table pairs every child with its parent by lineage and
bootstraps the paired change; that is analysis, testable on plain frames, and the
``authoring_progress`` asset only reads, calls :func:`progress_table`, writes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from envduels_dagster.core.coevolution import env_scores
from envduels_dagster.core.stats import paired_bootstrap as paired_change
from envduels_dagster.core.stats import spearman_with_permutation

COLUMNS = ["author", "round", "n_pairs", "solver_skill", "design_before", "design_after", "design_change",
           "design_change_lower", "design_change_upper", "hint_before", "hint_after", "hint_change",
           "hint_change_lower", "hint_change_upper"]


def progress_table(envs: pd.DataFrame, episodes: pd.DataFrame) -> pd.DataFrame:
    """Per author and round r >= 1: parent -> child change in design and hint score, paired by lineage."""
    scores = env_scores(episodes).set_index("env_id")
    round0 = episodes[(episodes["round"] == 0) & (episodes["author"] != episodes["solver"])
                      & (episodes["condition"] == "cold") & (episodes["status"] != "incomplete")]
    skill = round0.assign(y=(round0["status"] == "success").astype(float)).groupby("solver")["y"].mean()
    children = envs[(envs["round"] > 0) & envs["valid"] & envs["parent_env_id"].notna()]
    rows = []
    for (author, round_), grp in children.groupby(["author", "round"]):
        pairs = [(p, c) for p, c in zip(grp["parent_env_id"], grp["env_id"]) if p in scores.index and c in scores.index]
        before = scores.loc[[p for p, _ in pairs]] if pairs else scores.iloc[0:0]
        after = scores.loc[[c for _, c in pairs]] if pairs else scores.iloc[0:0]
        d_design = paired_change(after["design"].to_numpy() - before["design"].to_numpy())
        d_hint = paired_change(after["hint"].to_numpy() - before["hint"].to_numpy())
        rows.append({"author": author, "round": int(round_), "n_pairs": len(pairs),
                     "solver_skill": float(skill.get(author, np.nan)),
                     "design_before": float(before["design"].mean()), "design_after": float(after["design"].mean()),
                     "design_change": d_design[0], "design_change_lower": d_design[1],
                     "design_change_upper": d_design[2],
                     "hint_before": float(before["hint"].mean()), "hint_after": float(after["hint"].mean()),
                     "hint_change": d_hint[0], "hint_change_lower": d_hint[1], "hint_change_upper": d_hint[2]})
    return pd.DataFrame(rows, columns=COLUMNS)


def skill_vs_change(progress: pd.DataFrame, round_: int = 1) -> dict[str, float]:
    """Spearman rho and permutation p between solver skill and the design / hint change in ``round_``."""
    r = progress[progress["round"] == round_]
    rho_d, p_d = spearman_with_permutation(r["solver_skill"].to_numpy(), r["design_change"].to_numpy())
    rho_h, p_h = spearman_with_permutation(r["solver_skill"].to_numpy(), r["hint_change"].to_numpy())
    return {"skill_vs_design_change_rho": rho_d, "skill_vs_design_change_p": p_d,
            "skill_vs_hint_change_rho": rho_h, "skill_vs_hint_change_p": p_h}
