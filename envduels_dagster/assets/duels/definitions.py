"""The duels area: round-0 ``duel_episodes`` [author x solver], its checks, ``pair_job`` and the stale schedules."""

import os

import dagster as dg

from envduels_dagster.assets.duels.assets import duel_episodes
from envduels_dagster.assets.duels.checks import make_episodes_checks
from envduels_dagster.assets.duels.jobs import pair_job
from envduels_dagster.assets.duels.schedules import DEFAULT_STALE_CRON, stale_schedules


def defs() -> dg.Definitions:
    return dg.Definitions(assets=[duel_episodes], asset_checks=[make_episodes_checks(duel_episodes)], jobs=[pair_job],
                          schedules=stale_schedules(os.environ.get("ENVDUELS_STALE_CRON") or DEFAULT_STALE_CRON))
