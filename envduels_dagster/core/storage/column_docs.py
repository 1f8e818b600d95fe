"""What each result column means, in one place: the column descriptions of the product's tables.

Why here: Dagster shows a table asset's columns (``dagster/column_schema``) in its catalog; without a
description per column a reader of ``training_set``, ``author_value`` or ``rankings`` had to guess what
``p_best`` or ``solver_rank_upper`` is. The Dagster layer attaches these to the asset definitions and to
every materialization's schema (``assets/shared.py``); the README's table of tables points here. A column
added to a table's schema gets its line here too (``tests/core/storage/test_column_docs.py`` checks that every
column of the warehouse tables the Python assets write has one; ``tests/assets/test_column_schemas.py`` that
every table asset shows described columns). Not here, each in its own one source: the dbt marts' columns
(``dbt_project/models/marts/schema.yml``, read by dagster-dbt; ``pair_lift`` included) and the export files'
(``core/training/contract.py``, the fields' descriptions)."""

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
    "expected_learnable": "Sum over the sample of each slot's p_learnable, the training set's P(true p_cold <= 0.25 "
                          "and true p_hint >= 0.5): the expected number of learnable environments (one definition).",
    "per_env": "Learnable environments per environment slot (expected_learnable / n_envs; a slot is one lineage, "
               "so a slot hardened over rounds counts once however many environments it wrote).",
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

MODEL_REGISTRY = {
    "name": "The model's name in the registry (models.yaml): its partition key in every per-model asset.",
    "model": "provider/model string: a litellm model, or a registered provider's (envduels-sim/<profile>).",
    "api_base": "The endpoint's base URL (NULL: the provider's default).",
    "api_key_env": "NAME of the environment variable holding the API key (never the key itself).",
    "version": "The model's version label: changing it marks its episodes and environments stale.",
    "pool": "Provider label the concurrency and rate limits are shared by (default: the model prefix).",
    "provider": "The provider prefix of model (openai, envduels-sim, ...).",
    "simulated": "True for a simulated model (envduels-sim): no network, no cost.",
    "temperature": "Sampling temperature sent with every call.",
    "max_tokens": "Completion token limit per call.",
    "max_concurrency": "Calls in flight for this model within one pair.",
    "requests_per_minute": "Provider request rate limit, shared by the pool within a run (NULL: none).",
    "client": "Client path: auto, litellm, litellm-full or fast (the lean HTTP client for OpenAI-compatible servers).",
    "input_cost_per_mtok": "List price in USD per million prompt tokens.",
    "output_cost_per_mtok": "List price in USD per million completion tokens.",
    "roles": "What the model does: author (writes environments), solver (plays them), or both.",
    "budget_usd": "Spending cap for this model's calls (NULL: none).",
    "timeout_s": "Timeout per call, in seconds.",
    "params": "Provider options passed as given (JSON).",
    "reasoning_cost_per_mtok": "USD per million reasoning tokens (NULL: priced as output tokens).",
    "tokens_per_minute": "Provider token rate limit, per pool (NULL: none).",
    "max_in_flight": "Calls in flight for the pool across all pairs of a run (NULL: max_concurrency).",
    "max_reply_bytes": "Cap on one reply's body, raw and decompressed: past it the call fails as malformed.",
}

ENVIRONMENTS = {
    "env_id": "Environment id: unique per version (a hardened rewrite gets a new id).",
    "author": "The model that wrote it (or the import's label).",
    "round": "0 = original authoring, r = hardening round r.",
    "domain": "The environment's domain (search, deduction, navigation, induction, ...).",
    "family": "The author's own label of the design (informational only).",
    "class_name": "The environment class in its source (EnvDuels export format v1).",
    "max_turns": "Turn limit the environment is played with.",
    "source": "The environment's Python source as written.",
    "source_sha256": "sha256 of source.",
    "hint": "The author's privileged hint, given to the hinted side only.",
    "benchmark_seeds": "Seeds every solver plays it on (cold and hinted on each).",
    "valid": "Passed validation (loads in the sandbox, deterministic, winnable, not a duplicate).",
    "reject_reason": "Why validation rejected it (NULL when valid).",
    "winnability": "proven (a winning play was found), unproven or failed.",
    "parent_env_id": "The environment a hardening round rewrote (NULL in round 0).",
    "author_version": "The author's registry version when it was written.",
    "author_meta": "The metadata block exactly as the author wrote it (JSON).",
    "materialized_at": "When the row was written (UTC).",
    "author_calls": "Model calls spent writing it (authoring or hardening; validation makes none).",
    "author_prompt_tokens": "Prompt tokens of those calls.",
    "author_completion_tokens": "Completion tokens of those calls.",
    "author_cost_usd": "Their cost at list price, cache hits included; NULL when the model has no price.",
    "prompt_version": "The authoring prompt the reply answered (NULL for imports and older rows).",
}

EPISODES = {
    "env_id": "The environment played (table environments).",
    "author": "The model that wrote the environment.",
    "solver": "The model that played it.",
    "round": "The environment's round (0 = original authoring, r = hardening round r).",
    "condition": "cold (no hint) or hinted (the author's hint in the prompt).",
    "seed": "The environment seed (unsigned 64-bit).",
    "status": "success, failure, or incomplete (never counted as a failure).",
    "stop_reason": "Why it ended: terminated, truncated, max_turns; or (incomplete) env_error, llm_error, length, "
                   "stopped_at_budget.",
    "turns": "Turns played.",
    "max_turns": "The environment's turn limit.",
    "format_errors": "Replies without a parsable action.",
    "final_reward": "The environment's reward at the end (1 = solved).",
    "prompt_tokens": "Prompt tokens of the solver's calls.",
    "completion_tokens": "Completion tokens of the solver's calls.",
    "cost_usd": "Cost of those calls at list price (0 when unpriced).",
    "latency_s": "Wall time of the episode, in seconds.",
    "model_calls": "Model calls the episode made.",
    "cached_calls": "Of those, calls answered by the call cache.",
    "retries": "Failed attempts the gateway retried (rate limits, 5xx, timeouts, ...).",
    "retry_errors": "The retried errors' kinds, comma-separated.",
    "error": "The error that made the episode incomplete (NULL otherwise).",
    "transcript": "Each turn's observation, reply and action (JSON); read with `envduels show`.",
    "is_self_pair": "True when the solver plays its own environment (kept, flagged, left out of peer scores).",
    "solver_version": "The solver's registry version when played.",
    "materialized_at": "When the row was written (UTC).",
    "sampling": "fixed (seed committed before any outcome) or adaptive (played because earlier seeds left the "
                "verdict open; left out of the marts).",
    "reasoning_tokens": "The part of completion_tokens spent reasoning (reasoning models).",
    "finish_reasons": "The provider's finish reason per reply (JSON list).",
}

AUTHORING_PROGRESS = {
    "author": "The author whose hardened environments are compared with their parents.",
    "round": "The hardening round r >= 1 (children of round r against their round r-1 parents).",
    "n_pairs": "Parent -> child lineage pairs behind the changes.",
    "solver_skill": "Mean cold success of the peer solvers (the panel the scores are measured on).",
    "design_before": "Mean design score of the parents.",
    "design_after": "Mean design score of the children.",
    "design_change": "Mean paired change in design score (child - parent).",
    "design_change_lower": "design_change: 95% t interval over lineage pairs, lower bound.",
    "design_change_upper": "design_change: 95% t interval, upper bound.",
    "hint_before": "Mean hint lift of the parents.",
    "hint_after": "Mean hint lift of the children.",
    "hint_change": "Mean paired change in hint lift (child - parent).",
    "hint_change_lower": "hint_change: 95% t interval over lineage pairs, lower bound.",
    "hint_change_upper": "hint_change: 95% t interval, upper bound.",
    "design_change_reason": "Why the design_change interval is withheld (too few pairs, no spread).",
    "hint_change_reason": "Why the hint_change interval is withheld.",
}

LIFT_LEARNING = {
    "learner": "The learner trained.",
    "author": "The author whose training-set environments it was trained on.",
    "lift": "Mean hint lift the author's environments give the learner (pair_lift).",
    "n_train_envs": "Training-set environments from this author (rows with 0 are left out of the figures).",
    "n_heldout_envs": "Valid held-out environments of the author (written for the study, never trained on).",
    "cold_before": "The learner's cold success on the held-out environments before training.",
    "cold_after": "The same after training.",
    "gain": "cold_after - cold_before.",
}

AUTHOR_VALUE_MIX = {
    "learner": "The learner the budget is spent for.",
    "author": "An author of the best mix; (total) sums the mix.",
    "currency": "usd, or calls when no ranked author has a price.",
    "budget": "The part of the budget spent on this author (AuthorValueSettings).",
    "share": "That part as a share of the budget (at most max_share).",
    "envs_to_write": "Environment slots the budget buys from this author at its measured cost per slot.",
    "expected_learnable": "Expected learnable environments for the learner from them.",
    "expected_lower": "95% bootstrap lower bound of expected_learnable.",
    "expected_upper": "95% bootstrap upper bound of expected_learnable.",
}

DESIGN_CONVERGENCE = {
    "scope": "overall (all cross-author pairs), pair (two authors) or within (one author's own environments).",
    "author_a": "First author of the pair (NULL on the overall row).",
    "author_b": "Second author (the same as author_a on a within row).",
    "n_env_pairs": "Environment pairs the similarity is averaged over.",
    "similarity": "Mean cosine similarity of the environments' AST-shape n-gram tf-idf vectors.",
    "null_mean": "Mean similarity under the label-permutation null.",
    "null_lower": "2.5% quantile of the null.",
    "null_upper": "97.5% quantile of the null.",
    "z_score": "(similarity - null_mean) / the null's standard deviation.",
    "p_value": "One-sided permutation p-value for more similar than chance.",
    "p_value_holm": "p_value with Holm's adjustment over the author pairs (pair rows only).",
    "null_strata": "What the null permutes author labels within (family, domain, or unstratified).",
}

DESIGN_CONVERGENCE_CLUSTERS = {
    "cluster_id": "Cluster of near-identical designs (similarity >= threshold, single linkage), 1 = the largest.",
    "env_id": "An environment in the cluster.",
    "author": "Its author.",
    "domain": "Its domain.",
    "family": "The author's own label of its design.",
    "cluster_size": "Environments in the cluster.",
    "n_authors": "Authors the cluster spans (> 1: a design authors converged on).",
    "authors": "Those authors, comma-separated.",
    "mean_similarity": "Mean pairwise similarity within the cluster.",
}

_POP = "on the infinite-environment tournament (simultaneous sign set over the duels, Bonferroni)"
RANKINGS_SUMMARY = {
    "n_models": "Models in the duels.", "n_envs": "Environments behind the figures.",
    "n_boot": "Cluster-bootstrap replicates of the rankings.", "n_duels": "Duels (unordered pairs of models).",
    "n_decisive_duels": "Duels with a winner (each decided at its own 5% level).",
    "cyclic_triads": "Cyclic triads of the duel tournament (A beats B beats C beats A).",
    "cyclic_triads_max": "The most cyclic triads a tournament of n_models can have.",
    "kendall_zeta": "Kendall's zeta: 1 - cyclic_triads / cyclic_triads_max (1 = perfectly transitive).",
    "role_rho": "Spearman rho between solver rank and author rank (role separation).",
    "role_rho_lower": "role_rho: 95% bootstrap lower bound.", "role_rho_upper": "role_rho: 95% bootstrap upper bound.",
    "role_p_value": "Permutation p-value of role_rho.", "role_n_permutations": "Permutations behind role_p_value.",
    "role_n_models": "Models with both a solver and an author rank.",
    "skill_order_kendall_tau": "Kendall tau between the solver ranking and the documented skill order of simulated "
                               "models (NULL otherwise).",
    "bt_converged": "Whether the Bradley-Terry fit converged.", "bt_iterations": "Iterations of that fit.",
    "tournament_complete": "Whether every pair of models dueled.", "n_triads": "Triads of models.",
    "n_triads_complete": "Triads whose three duels were all played.",
    "n_decisive_duels_holm": "Duels with a winner under Holm's control over all duels.",
    "duel_decision_control": "The multiple-comparison control of n_decisive_duels_holm.",
    "round": "The round these figures are of (0 = the benchmark).",
    "kendall_zeta_lower": "kendall_zeta: 95% bootstrap lower bound (every duel re-decided per replicate).",
    "kendall_zeta_upper": "kendall_zeta: 95% bootstrap upper bound.",
    "cyclic_triads_lower": "cyclic_triads: 95% bootstrap lower bound.",
    "cyclic_triads_upper": "cyclic_triads: 95% bootstrap upper bound.",
    "bt_separated": "Some model never dropped a point to the rest: its strength is set by the prior.",
    "bt_boot_converged": "Share of bootstrap replicates whose Bradley-Terry fit converged.",
    "tournament_n_boot": "Replicates behind the tournament intervals.",
    "kendall_zeta_n_boot": "Replicates with a defined kendall_zeta.",
    "tournament_min_envs_per_author": "Fewest environments of an author in the duels.",
    "bt_interval_reason": "Why the Bradley-Terry intervals are withheld.",
    "kendall_zeta_reason": "Why the kendall_zeta interval is withheld.",
    "cyclic_triads_reason": "Why the cyclic_triads interval is withheld.",
    "tournament_interval_method": "How the tournament intervals were computed.",
    "tournament_interval_estimand": "What the tournament intervals cover (this design's tournament).",
    "tournament_decision_control": "The multiple-comparison control of the re-decided duels.",
    "kendall_zeta_population_lower": f"kendall_zeta: lower bound {_POP}.",
    "kendall_zeta_population_upper": f"kendall_zeta: upper bound {_POP}.",
    "cyclic_triads_population_lower": f"cyclic_triads: lower bound {_POP}.",
    "cyclic_triads_population_upper": f"cyclic_triads: upper bound {_POP}.",
    "population_undecided_pairs": "Duels whose population sign the data leave open.",
    "population_patterns": "Outcome patterns of those duels enumerated for the bounds.",
    "population_interval_reason": "Why the population bounds are withheld.",
    "population_decision_control": "The control of the simultaneous sign set (Bonferroni over the duels).",
    "population_interval_estimand": "What the population bounds cover (every duel by its population lift's sign).",
    "population_interval_method": "How the population bounds were computed.",
    "role_rho_reason": "Why the role_rho interval is withheld.", "role_rho_n_boot": "Replicates behind it.",
    "role_min_envs_per_author": "Fewest environments of an author behind role_rho.",
}

_SCORES = {
    "solver_score": "Mean cold success on other authors' environments",
    "solver_hinted": "Mean hinted success on other authors' environments",
    "author_score": "Mean peer hint lift of the author's environments (hint score)",
    "design_score": "Mean discrimination of the author's environments over peer solvers' cold results",
    "design_score_corrected": "Design score corrected for seed noise (squared scale)",
    "bt_strength": "Bradley-Terry strength of the duels (log scale)",
}


# Which companions each figure of ``rankings`` has (the table's columns, checked by tests/core/storage/test_column_docs.py).
_BOOT, _CI, _POPS, _WHY = ("_lower", "_upper", "_interval_reason"), ("_ci_lower", "_ci_upper", "_ci_reason"), \
    ("_population_lower", "_population_upper"), ("_reason",)
_COMPANIONS = {"solver_score": _BOOT + _CI, "solver_hinted": _BOOT, "author_score": _BOOT + _CI, "design_score": _BOOT,
               "design_score_corrected": _BOOT + _CI, "bt_strength": ("_lower", "_upper", "_reason") + _POPS}
_RANK_COMPANIONS = {"solver": _BOOT, "author": _BOOT, "bt": ("_lower", "_upper") + _POPS}


def _rankings() -> dict[str, str]:
    docs = {"model": "The model (registry name; an import is an author only).",
            "round": "The round these figures are of (DuelSettings.rankings_round; 0 = the benchmark).",
            "duel_wins": "Duels won (head to head over shared environments).", "duel_ties": "Duels tied.",
            "duel_losses": "Duels lost.", "author_n_envs": "Environments the model wrote (its author sample).",
            "solver_n_envs": "Other authors' environments the model solved (its solver sample).",
            "solver_min_seeds": "Fewest matched seeds of those environments.",
            "sim_skill_rank": "The documented skill order of a simulated model (1 = strongest); NULL otherwise.",
            "run_id": "The Dagster run that produced this content (published snapshot only).",
            "data_version": "Hash of the rows: Dagster's data version (published snapshot only)."}
    texts = {"_lower": "95% cluster-bootstrap lower bound (NULL with {k}_interval_reason)",
             "_upper": "95% cluster-bootstrap upper bound",
             "_interval_reason": "why the bootstrap interval of {k} is withheld (below its calibrated size)",
             "_ci_lower": f"{_T95}, lower bound (NULL with {{k}}_ci_reason)", "_ci_upper": f"{_T95}, upper bound",
             "_ci_reason": "why the t interval of {k} is withheld",
             "_population_lower": "lower bound on the infinite-environment tournament",
             "_population_upper": "upper bound on the infinite-environment tournament",
             "_reason": "why {k} or its interval has no value"}
    for key, what in _SCORES.items():
        docs[key] = f"{what}."
        for suffix in _COMPANIONS[key]:
            docs[f"{key}{suffix}"] = f"{what}: {texts[suffix].format(k=key)}."
    for role, suffixes in _RANK_COMPANIONS.items():
        docs[f"{role}_rank"] = f"Rank by {'Bradley-Terry strength' if role == 'bt' else f'{role} score'}, 1 = best."
        for suffix in suffixes:
            what = {"_lower": "Best rank in the 95% interval", "_upper": "Worst rank in the 95% interval",
                    "_interval_reason": "Why the rank interval is withheld",
                    "_population_lower": "Best rank on the infinite-environment tournament",
                    "_population_upper": "Worst rank on the infinite-environment tournament"}[suffix]
            docs[f"{role}_rank{suffix}"] = f"{what} ({role} rank)."
    return docs


RANKINGS = _rankings()
DOCS = {"training_set": TRAINING_SET, "author_value": AUTHOR_VALUE, "rankings": RANKINGS,
        "model_registry": MODEL_REGISTRY, "environments": ENVIRONMENTS, "episodes": EPISODES,
        "authoring_progress": AUTHORING_PROGRESS, "lift_learning": LIFT_LEARNING,
        "author_value_mix": AUTHOR_VALUE_MIX, "design_convergence": DESIGN_CONVERGENCE,
        "design_convergence_clusters": DESIGN_CONVERGENCE_CLUSTERS, "rankings_summary": RANKINGS_SUMMARY}


def describe(table: str, column: str) -> str | None:
    """The column's description, or None when the table's columns are not documented here."""
    return DOCS.get(table, {}).get(column)
