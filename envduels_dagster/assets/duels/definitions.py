"""The duels area: round-0 ``duel_episodes`` [author x solver], its checks and ``pair_job``."""

import dagster as dg

from envduels_dagster.assets.duels.assets import duel_episodes
from envduels_dagster.assets.duels.checks import make_episodes_checks
from envduels_dagster.assets.duels.jobs import pair_job


def defs() -> dg.Definitions:
    return dg.Definitions(assets=[duel_episodes], asset_checks=[make_episodes_checks(duel_episodes)], jobs=[pair_job])
