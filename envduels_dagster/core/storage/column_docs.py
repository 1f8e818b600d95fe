"""What each result column means, in one place: the column descriptions of the product's tables.

Why here: Dagster shows a table asset's columns (``dagster/column_schema``) in its catalog; without a
description per column a reader of ``training_set``, ``author_value`` or ``rankings`` had to guess what
``p_best`` or ``solver_rank_upper`` is. The Dagster layer attaches these to the asset definitions and to
every materialization's schema (``assets/shared.py``); the README's table of tables points here. A column
added to a table's schema gets its line here too (``tests/core/test_column_docs.py`` checks that every
column of these tables has one).
"""

from __future__ import annotations

_T95 = "95% Student-t interval over environments"

TRAINING_SET = {
    "learner": "The learner (solver partition) this training set is for.",
    "env_id": "Environment id (table environments): the newest valid version of its lineage.",
    "author": "The model that wrote the environment (never the learner itself unless configured).",
    "domain": "The environment's domain (search, deduction, navigation, induction, ...).",
    "class_name": "The environment class in its source (EnvDuels export format v1).",
    "max_turns": "Turn limit the environment is played with.",
    "source_sha256": "sha256 of the environment's source, as exported.",
    "hint": "The author's privileged hint, given to the hinted side only.",
    "benchmark_seeds": "Seeds the environment was played on (cold and hinted on each).",
    "n_seeds": "Matched seeds (played cold and hinted, neither incomplete) behind p_cold and p_hint.",
    "p_cold": "The learner's success rate without the hint, over the matched seeds.",
    "p_hint": "The learner's success rate with the hint, over the matched seeds.",
    "lift": "Hint lift: p_hint - p_cold (what the rows are ranked by).",
    "lift_lower": "Lower bound of the lift's 95% interval (union of the fitted- and uniform-prior posterior "
                  "intervals; docs/STATISTICS.md).",
    "lift_upper": "Upper bound of the lift's 95% interval.",
    "rank": "Position in the training set, 1 = highest lift.",
    "p_learnable": "Posterior probability that the true cold rate is <= cold_ceiling and the true hinted rate "
                   ">= the training_min_hint (under the joint prior fitted on every learner's rows).",
    "admission_method": "How rows were admitted: probability (p_learnable >= admission_threshold) or rule.",
    "admission_threshold": "The p_learnable an environment needs (NULL under the fixed rule).",
    "cold_ceiling": "Highest true cold rate that still counts as learnable.",
    "prior_rows": "(environment, learner) rows the joint prior of the rates was fitted on.",
    "run_id": "The Dagster run that produced this content (published snapshot only).",
    "data_version": "Hash of the learner's rows: Dagster's data version (published snapshot only).",
}

AUTHOR_VALUE = {
    "learner": "The learner (partition) the value is measured for.",
    "author": "The model that wrote the environments.",
    "is_self": "True for the learner's own environments (shown, never ranked).",
    "status": "ranked; self-authored (not ranked); insufficient data (fewer than min_envs slots); or no price "
              "(listed apart) when other authors are priced.",
    "n_slots": "Environment slots the author was asked for (a slot = round-0 attempt plus its hardened versions).",
    "n_envs": "Slots in the sample: rejected ones (count 0) and valid ones the learner played.",
    "n_written": "Environment versions written over all rounds, rejected included.",
    "n_valid": "Versions that passed validation.",
    "validity_rate": "n_valid / n_written.",
    "n_unplayed": "Valid slots the learner has no matched seed on (left out of the sample, not counted as 0).",
    "n_seeds": "Matched seeds behind the learnable probabilities.",
    "expected_learnable": "Sum over the sample of each slot's learnable probability (fails cold, passes hinted).",
    "per_env": "Learnable environments per environment written (expected_learnable / n_envs).",
    "per_env_lower": "95% percentile-bootstrap lower bound of per_env (NULL below min_envs).",
    "per_env_upper": "95% percentile-bootstrap upper bound of per_env.",
    "author_calls": "Model calls spent writing the slots (authoring, rejected attempts, hardening).",
    "author_tokens": "Prompt and completion tokens of those calls.",
    "author_cost_usd": "Their cost at the registry's list price; NULL when the model has no price (never 0).",
    "priced": "Whether every slot of the author has a price.",
    "price_note": "Why a figure is missing (no price).",
    "per_usd": "Learnable environments per US dollar of writing (NULL without a price).",
    "per_usd_lower": "95% lower bound of per_usd.",
    "per_usd_upper": "95% upper bound of per_usd.",
    "per_kcall": "Learnable environments per 1000 authoring calls.",
    "per_kcall_lower": "95% lower bound of per_kcall.",
    "per_kcall_upper": "95% upper bound of per_kcall.",
    "eval_calls": "The learner's calls playing this author's environments (reported apart, not in per_usd).",
    "eval_cost_usd": "What these runs spent on that play (cache hits cost nothing); NULL when nothing was priced.",
    "rank_basis": "What ranks are by: per_usd when some ranked author has a price, else per_kcall.",
    "rank": "Rank among the ranked authors, 1 = the one to pay (NULL when not ranked).",
    "rank_lower": "Best rank in the 95% bootstrap rank interval.",
    "rank_upper": "Worst rank in the 95% bootstrap rank interval.",
    "p_best": "Share of bootstrap replicates in which the author ranks first.",
}

_SCORES = {
    "solver_score": "Mean cold success on other authors' environments",
    "solver_hinted": "Mean hinted success on other authors' environments",
    "author_score": "Mean peer hint lift of the author's environments (hint score)",
    "design_score": "Mean discrimination of the author's environments over peer solvers' cold results",
    "design_score_corrected": "Design score corrected for seed noise (squared scale)",
    "bt_strength": "Bradley-Terry strength of the duels (log scale)",
}


def _rankings() -> dict[str, str]:
    docs = {"model": "The model (registry name; an import is an author only).",
            "round": "The round these figures are of (DuelSettings.rankings_round; 0 = the benchmark).",
            "duel_wins": "Duels won (head to head over shared environments).", "duel_ties": "Duels tied.",
            "duel_losses": "Duels lost.", "author_n_envs": "Environments the model wrote (its author sample).",
            "solver_n_envs": "Other authors' environments the model solved (its solver sample).",
            "solver_min_seeds": "Fewest matched seeds of those environments.",
            "sim_skill_rank": "The documented skill order of a simulated model (1 = strongest); NULL otherwise.",
            "bt_rank": "Rank by Bradley-Terry strength.", "bt_separated": "The model never dropped a point to the rest: "
            "its strength is set by the prior.",
            "run_id": "The Dagster run that produced this content (published snapshot only).",
            "data_version": "Hash of the rows: Dagster's data version (published snapshot only)."}
    for key, what in _SCORES.items():
        docs[key] = f"{what}."
        docs[f"{key}_lower"] = f"{what}: 95% cluster-bootstrap lower bound (NULL with {key}_interval_reason)."
        docs[f"{key}_upper"] = f"{what}: 95% cluster-bootstrap upper bound."
        docs[f"{key}_interval_reason"] = f"Why the bootstrap interval of {key} is withheld (below its calibrated size)."
        docs[f"{key}_ci_lower"] = f"{what}: {_T95}, lower bound (NULL with {key}_ci_reason)."
        docs[f"{key}_ci_upper"] = f"{what}: {_T95}, upper bound."
        docs[f"{key}_ci_reason"] = f"Why the t interval of {key} is withheld."
        docs[f"{key}_population_lower"] = f"{what}: lower bound on the infinite-environment tournament."
        docs[f"{key}_population_upper"] = f"{what}: upper bound on the infinite-environment tournament."
        docs[f"{key}_reason"] = f"Why {key} has no value."
    for role in ("solver", "author", "bt", "design"):
        docs[f"{role}_rank"] = docs.get(f"{role}_rank", f"Rank by {role} score, 1 = best.")
        docs[f"{role}_rank_lower"] = f"Best rank in the 95% interval of the {role} rank."
        docs[f"{role}_rank_upper"] = f"Worst rank in the 95% interval of the {role} rank."
        docs[f"{role}_rank_interval_reason"] = f"Why the {role} rank interval is withheld."
        docs[f"{role}_rank_population_lower"] = f"Best {role} rank on the infinite-environment tournament."
        docs[f"{role}_rank_population_upper"] = f"Worst {role} rank on the infinite-environment tournament."
    return docs


RANKINGS = _rankings()
DOCS = {"training_set": TRAINING_SET, "author_value": AUTHOR_VALUE, "rankings": RANKINGS}


def describe(table: str, column: str) -> str | None:
    """The column's description, or None when the table's columns are not documented here."""
    return DOCS.get(table, {}).get(column)
