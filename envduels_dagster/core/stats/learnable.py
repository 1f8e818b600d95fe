"""The one definition of "learnable", shared by the answer (``author_value``) and the training set.

Learnable: an (environment, learner) whose *true* cold success rate is at most ``cold_ceiling`` and whose true
hinted success rate is at least ``min_hint`` (the learner mostly fails it alone and mostly passes it with the
hint). The data give each row a posterior probability of that, ``p_learnable``
(``joint_admission.joint_learnable_probability`` under the joint prior of the two rates fitted on every learner's
peer rows of the warehouse). The training set admits a row when ``p_learnable`` reaches its threshold; the answer
counts ``p_learnable`` summed over an author's environments: the expected number of learnable environments it
wrote for the learner, of which the training set holds the ones it is sure enough of (docs/STATISTICS.md,
"One definition of learnable"; docs/DECISIONS.md says why this direction).

Why one function: until issue 42 the answer counted a *seed* as learnable when the learner failed it cold and
passed it hinted (a per-seed Beta-Binomial rate), the training set an *environment* by its true rates; the answer
could say "pay novice" while none of novice's environments entered the training set.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from envduels_dagster.core.stats import joint_admission as ja
from envduels_dagster.core.stats.lift import env_solver_stats

COLD_CEILING = 0.25
MIN_HINT = 0.5


@dataclass(frozen=True)
class LearnableRows:
    rows: pd.DataFrame  # the learner's env_solver_stats rows (every author, self included) with ``p_learnable``
    prior: ja.JointPrior  # fitted on ``peer`` (every learner's peer rows)
    peer: pd.DataFrame  # the rows that fitted the prior


def superseded_env_ids(envs: pd.DataFrame) -> set[str]:
    """Environments with a valid hardened child: the newest valid version of each lineage replaces them."""
    return set(envs.loc[envs["valid"].astype(bool) & envs["parent_env_id"].notna(), "parent_env_id"])


def learnable_rows(episodes: pd.DataFrame, envs: pd.DataFrame, learner: str, cold_ceiling: float = COLD_CEILING,
                   min_hint: float = MIN_HINT) -> LearnableRows:
    """The learner's (environment, learner) rows with ``p_learnable``: P(true p_cold <= ``cold_ceiling`` and true
    p_hint >= ``min_hint`` | its matched seeds, the fitted prior).

    ``episodes``: every solver's episodes (the other learners' rows fit the prior); superseded versions (a valid
    hardened child exists) are left out, so each lineage is represented by its newest valid version."""
    stats = env_solver_stats(episodes[~episodes["env_id"].isin(superseded_env_ids(envs))])
    peer = stats[stats["author"] != stats["solver"]]
    prior = ja.fit_joint_prior(*ja.counts(peer))
    mine = stats[stats["solver"] == learner].reset_index(drop=True)
    p = ja.joint_learnable_probability(prior, *ja.counts(mine), cold_ceiling, min_hint)
    return LearnableRows(mine.assign(p_learnable=p), prior, peer)
