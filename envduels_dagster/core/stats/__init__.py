"""Every statistic of the product, defined once (DESIGN §6); pure numpy/pandas/scipy, no Dagster.

Why one package: the same figures (bootstrap intervals, peer discrimination, Spearman with a
permutation p, the categories and the training rule) used to be written two or three times
across rankings, co-evolution, the adaptive sampler and the assets, and drifted. The dbt marts
mirror a few of them in SQL; tests/assets/marts/test_marts.py holds each mirror equal to this package.

* ``rules``: categories (wasted / noise / learnable) and the training rule.
* ``lift``: matched seeds, per (environment, solver) statistics, pair lift, training candidates.
* ``intervals``: Student-t intervals over environments (a mean, a Welch difference) with a stated minimum.
* ``admission``: training-set admission as the posterior probability that an environment is learnable.
* ``bootstrap``: cluster / paired bootstrap of a mean, stratified cluster weights, percentile intervals.
* ``ranks``: average ranks, Spearman, Kendall, permutation p-values.
* ``discrimination``: the peer panel's discrimination (author design score).
* ``multiple``: Holm and Benjamini-Hochberg control for families of decisions (the lift grid's); Welch p-values.
* ``tournament``: Bradley-Terry and cyclic triads of the duel tournament.
"""

from envduels_dagster.core.stats.admission import (
    admission_table,
    expected_false_admissions,
    learnable_probability,
    lift_posterior_interval,
)
from envduels_dagster.core.stats.bootstrap import (
    bootstrap_mean,
    cluster_bootstrap_mean,
    paired_bootstrap,
    percentile_interval,
    stratified_cluster_weights,
)
from envduels_dagster.core.stats.discrimination import discrimination, discrimination_rows
from envduels_dagster.core.stats.intervals import MIN_ENVS, Interval, difference_interval, mean_interval, t_critical
from envduels_dagster.core.stats.lift import env_solver_stats, matched_seeds, pair_lift, training_candidates
from envduels_dagster.core.stats.multiple import benjamini_hochberg, holm, lift_grid_tests, welch_p_value
from envduels_dagster.core.stats.ranks import (
    kendall_tau,
    permutation_pvalue,
    rank_desc,
    rowwise_spearman,
    spearman,
    spearman_with_permutation,
)
from envduels_dagster.core.stats.rules import LEARNABLE, NOISE, WASTED, admits, categorize, category, is_member
from envduels_dagster.core.stats.tournament import bradley_terry, bradley_terry_bootstrap, cyclic_triads, wins_matrix

__all__ = [
    "admission_table", "expected_false_admissions", "learnable_probability", "lift_posterior_interval",
    "benjamini_hochberg", "holm", "lift_grid_tests", "welch_p_value",
    "MIN_ENVS", "Interval", "difference_interval", "mean_interval", "t_critical",
    "LEARNABLE", "NOISE", "WASTED", "admits", "bootstrap_mean", "bradley_terry", "bradley_terry_bootstrap", "categorize", "category", "cluster_bootstrap_mean",
    "cyclic_triads", "discrimination", "discrimination_rows", "env_solver_stats", "is_member", "kendall_tau", "matched_seeds",
    "paired_bootstrap", "pair_lift", "percentile_interval", "permutation_pvalue", "rank_desc", "rowwise_spearman",
    "spearman", "spearman_with_permutation", "stratified_cluster_weights", "training_candidates", "wins_matrix",
]
