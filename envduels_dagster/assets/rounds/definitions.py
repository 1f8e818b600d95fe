"""The rounds area: ENVDUELS_ROUNDS co-evolution rounds (hardening + pairs, each with the round-0 checks)
and ``authoring_progress``."""


import dagster as dg

from envduels_dagster.assets.authoring.checks import make_environments_checks
from envduels_dagster.assets.checking.results import make_result_checks
from envduels_dagster.assets.duels.assets import duel_episodes
from envduels_dagster.assets.duels.checks import make_episodes_checks
from envduels_dagster.assets.rounds.assets import authoring_progress, round_assets
from envduels_dagster.assets.rounds.jobs import round_jobs


def configured_rounds() -> int:
    """The experiment's stored rounds, else ENVDUELS_ROUNDS (default 1, 0..20: env_settings.py), read when the
    definitions are built (a change of the stored rounds reaches a running UI when it reloads the location)."""
    from envduels_dagster.settings.experiment import for_runs

    return for_runs()["rounds"]


def defs(rounds: int | None = None) -> dg.Definitions:
    rounds = configured_rounds() if rounds is None else rounds
    assets = round_assets(duel_episodes, rounds)
    checks = [make_environments_checks(hardened, r) for r, hardened in enumerate(assets[0::2], start=1)]
    checks += [make_episodes_checks(pairs, r) for r, pairs in enumerate(assets[1::2], start=1)]
    checks.append(make_result_checks("authoring_progress"))
    return dg.Definitions(assets=[*assets, authoring_progress], asset_checks=checks, jobs=round_jobs(rounds))
