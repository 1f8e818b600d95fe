"""How big a duel is: environments per author, benchmark seeds, concurrency, training filter."""

from collections.abc import Callable
from typing import Any

import dagster as dg

from envduels_dagster.env_settings import SettingsError, value  # noqa: F401  (SettingsError: re-exported)


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
    # Training admission (core/training_set.py). "probability": admit an environment when the posterior
    # probability that it is learnable (true p_cold <= training_cold_ceiling, true p_hint >=
    # training_min_hint) reaches training_admission_threshold. "rule": observed p_cold <= training_max_cold
    # and observed p_hint >= training_min_hint (the fixed rule on 4 seeds; docs/STATISTICS.md measures both).
    training_admission: str = "probability"
    training_admission_threshold: float = 0.5
    training_cold_ceiling: float = 0.25
    training_max_cold: float = 0.0
    training_min_hint: float = 0.5
    training_include_self_authored: bool = False
    # Speed (docs/BENCHMARKS.md). reuse_sandboxes: one sandbox worker plays consecutive episodes of an
    # environment (fewer worker starts; the CPU-seconds limit then covers those episodes together).
    reuse_sandboxes: bool = False
    # Adaptive sampling (core/adaptive.py): per (environment, solver) stop once training membership is
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


# Environment variables that size and shape the runs the daemon launches (the demo honours them too),
# read when the definitions are built; their ranges are checked once, up front (env_settings.py):
# ENVDUELS_ENVS_PER_AUTHOR, ENVDUELS_SEEDS (how many benchmark seeds a newly written environment gets:
# 0..N-1), ENVDUELS_TRAINING_ADMISSION.
SETTINGS_ENV: dict[str, tuple[str, Callable[[Any], object]]] = {
    "ENVDUELS_ENVS_PER_AUTHOR": ("envs_per_author", int),
    "ENVDUELS_SEEDS": ("benchmark_seeds", lambda n: list(range(n))),
    "ENVDUELS_TRAINING_ADMISSION": ("training_admission", str),
}


def settings_from_env(**overrides) -> DuelSettings:
    """``DuelSettings`` with the SETTINGS_ENV variables that are set, then ``overrides``; SettingsError when bad."""
    import os

    values = {field: cast(value(var)) for var, (field, cast) in SETTINGS_ENV.items() if os.environ.get(var, "").strip()}
    return DuelSettings(**{**values, **overrides})
