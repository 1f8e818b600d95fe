"""How big a duel is: environments per author, benchmark seeds, concurrency, training filter."""

from collections.abc import Callable
from typing import Any

import dagster as dg

from envduels_dagster.core.authoring.plan import (
    DEFAULT_DOMAIN_FAMILIES,
    DEFAULT_DUPLICATE_THRESHOLD,
    DEFAULT_WAVE_SIZE,
    AuthoringPlan,
    AuthoringPlanError,
)
from envduels_dagster.settings.variables import SettingsError, is_set, value  # noqa: F401  (SettingsError: re-exported)


class DuelSettings(dg.ConfigurableResource):
    envs_per_author: int = 10  # results mean something from ~10 (docs/STATISTICS.md); tests pass their own
    # 8 seeds: with 4 a perfect row (0/4 cold, 4/4 hinted) reached only P(learnable) = 0.63 and the demo's
    # training sets held 0-4 environments per learner; with 8 they hold 3-10 (docs/STATISTICS.md, Default scale)
    benchmark_seeds: list[int] = [0, 1, 2, 3, 4, 5, 6, 7]
    episode_concurrency: int = 8
    episode_budget_s: float = 600.0  # wall time an episode may spend waiting on the model
    study_heldout_envs: int = 3  # held-out environments per author in the lift->learning study
    study_train_on: str = "all_valid"  # or "training_set": which of an author's environments the learner trains on
    transcript_budget_chars: int = 1500  # failure excerpts an author sees per environment in a hardening round
    # Training admission (core/training/training_set.py). "probability": admit an environment when the posterior
    # probability that it is learnable (true p_cold <= training_cold_ceiling, true p_hint >=
    # training_min_hint) reaches training_admission_threshold. "rule": observed p_cold <= training_max_cold
    # and observed p_hint >= training_min_hint (the fixed rule on 4 seeds; docs/STATISTICS.md measures both).
    training_admission: str = "probability"
    training_admission_threshold: float = 0.5
    training_cold_ceiling: float = 0.25
    training_max_cold: float = 0.0
    training_min_hint: float = 0.5
    training_include_self_authored: bool = False
    # Adaptive sampling (core/play/adaptive.py): per (environment, solver) stop once training membership is
    # settled at adaptive_confidence, and give borderline pairs extra seeds up to adaptive_max_seeds.
    # Off: every benchmark seed is played, exactly as before.
    adaptive_sampling: bool = False
    adaptive_confidence: float = 0.9
    adaptive_max_seeds: int = 8
    # Data checks: a pair's lift needs at least this many matched seeds (both conditions completed).
    check_min_matched_seeds: int = 4
    # Rounds (docs/DECISIONS.md "Rounds in the marts"): the marts are per round; rankings, duel records and the
    # demo leaderboard read this one. 0 = the benchmark (original authoring); r >= 1 = hardening round r.
    rankings_round: int = 0
    # Authoring slots that differ (core/authoring/plan.py, issue 31): slot K's domain family is
    # author_domains[K % len]; slots go in waves of author_wave_size, a later wave sees the earlier designs;
    # a reply whose code has AST similarity >= author_duplicate_threshold with an earlier valid environment
    # of the batch is rejected as "duplicate of <env_id>" (None: no check; simulated authors are exempt).
    author_domains: list[str] = list(DEFAULT_DOMAIN_FAMILIES)
    author_duplicate_threshold: float | None = DEFAULT_DUPLICATE_THRESHOLD
    author_wave_size: int = DEFAULT_WAVE_SIZE

    def authoring_plan(self) -> AuthoringPlan:
        """The authoring settings, checked (``AuthoringPlanError`` names the bad one)."""
        return AuthoringPlan(tuple(self.author_domains), self.author_duplicate_threshold, self.author_wave_size)

    def training_rule(self):
        """The training set's admission rule (``core.training.training_set.TrainingRule``) these settings give."""
        from envduels_dagster.core.training.training_set import TrainingRule  # (pandas: not at definition load)

        return TrainingRule(self.training_max_cold, self.training_min_hint, self.training_include_self_authored,
                            self.training_admission, self.training_admission_threshold, self.training_cold_ceiling)


# Environment variables that size and shape the runs the daemon launches (the demo honours them too),
# read when the definitions are built; parsed and checked in one place, the settings table
# (settings/variables.py): ENVDUELS_ENVS_PER_AUTHOR, ENVDUELS_SEEDS (how many benchmark seeds a newly written
# environment gets: 0..N-1), ENVDUELS_TRAINING_ADMISSION, and the authoring slots' ENVDUELS_AUTHOR_DOMAINS,
# ENVDUELS_AUTHOR_DUPLICATE_THRESHOLD, ENVDUELS_AUTHOR_WAVE.
SETTINGS_ENV: dict[str, tuple[str, Callable[[Any], object]]] = {
    "ENVDUELS_ENVS_PER_AUTHOR": ("envs_per_author", int),
    "ENVDUELS_SEEDS": ("benchmark_seeds", lambda n: list(range(n))),
    "ENVDUELS_TRAINING_ADMISSION": ("training_admission", str),
    "ENVDUELS_AUTHOR_DOMAINS": ("author_domains", list),
    "ENVDUELS_AUTHOR_DUPLICATE_THRESHOLD": ("author_duplicate_threshold", lambda v: v),
    "ENVDUELS_AUTHOR_WAVE": ("author_wave_size", int),
}


def settings_from_env(**overrides) -> DuelSettings:
    """``DuelSettings`` with the stored sizes (else ENVDUELS_ENVS_PER_AUTHOR / ENVDUELS_SEEDS), the other SETTINGS_ENV
    variables that are set, then ``overrides``; SettingsError when bad."""
    from envduels_dagster.settings.experiment import SIZE_ENV, for_runs

    # The sizes are the experiment's stored settings once a run stored them (envduels_dagster/settings/experiment.py); the
    # variables size only an experiment that has none yet. A command's own sizes come in as ``overrides``.
    sizes = for_runs()
    values: dict[str, object] = {"envs_per_author": sizes["envs_per_author"],
                                 "benchmark_seeds": list(range(sizes["seeds"]))}
    for var, (field, cast) in SETTINGS_ENV.items():
        if is_set(var) and var not in SIZE_ENV.values():
            values[field] = cast(value(var))
    settings = DuelSettings(**{**values, **overrides})
    try:
        settings.authoring_plan()  # e.g. a wave size passed as an override: refused here too, before any write
    except AuthoringPlanError as exc:
        raise SettingsError(f"authoring settings cannot be used: {exc}") from None
    return settings
