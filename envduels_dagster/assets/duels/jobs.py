"""``pair_job``: one (author, solver) pair, the unit the sensor and the stale schedule launch.

A job may not mix partitions definitions, hence one job per area rather than one for both.
"""

import dagster as dg

pair_job = dg.define_asset_job(
    "pair_job", selection=dg.AssetSelection.assets("duel_episodes"),
    description="Play one (author, solver) pair.")
