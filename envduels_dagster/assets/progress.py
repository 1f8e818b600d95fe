"""``authoring_progress``: who learns to author from how others played?"""

import dagster as dg
import numpy as np
import pandas as pd
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.common import AFTER_PAIRS, OWNERS, markdown_table
from envduels_dagster.core.coevolution import env_scores
from envduels_dagster.core.stats import paired_bootstrap as paired_change
from envduels_dagster.core.stats import spearman_with_permutation
from envduels_dagster.core.warehouse import read_table, replace_rows

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


@dg.asset(
    deps=["duel_episodes"], group_name="coevolution", kinds={"python", "duckdb"}, owners=OWNERS,
    tags={"layer": "mart"}, automation_condition=AFTER_PAIRS,
    description="Per author and hardening round: change in design score (peer discrimination) and hint score "
                "(peer lift) from each environment to its hardened child, with bootstrap 95% intervals, and the "
                "rank correlation between an author's solver skill and its improvement.",
)
def authoring_progress(warehouse: DuckDBResource) -> dg.MaterializeResult:
    with warehouse.get_connection() as conn:
        envs = read_table(conn, "environments")
        episodes = read_table(conn, "episodes")
    df = progress_table(envs, episodes)
    with warehouse.get_connection() as conn:
        replace_rows(conn, "authoring_progress", df)
    r1 = df[df["round"] == 1]
    rho_d, p_d = spearman_with_permutation(r1["solver_skill"].to_numpy(), r1["design_change"].to_numpy())
    rho_h, p_h = spearman_with_permutation(r1["solver_skill"].to_numpy(), r1["hint_change"].to_numpy())
    return dg.MaterializeResult(metadata={
        "num_rows": len(df),
        "progress": dg.MetadataValue.md(markdown_table(df[["author", "round", "n_pairs", "solver_skill",
                                                            "design_change", "hint_change"]])),
        "skill_vs_design_change_rho": rho_d, "skill_vs_design_change_p": p_d,
        "skill_vs_hint_change_rho": rho_h, "skill_vs_hint_change_p": p_h,
    })
