"""Asset jobs, one per partitions definition (a job may not mix them), for sensors and schedules."""

import dagster as dg


author_job = dg.define_asset_job(
    "author_job", selection=dg.AssetSelection.assets("authored_environments"),
    description="Author and validate one model's environments.")
pair_job = dg.define_asset_job(
    "pair_job", selection=dg.AssetSelection.assets("duel_episodes"),
    description="Play one (author, solver) pair.")

# Tags: runs are limited per provider by dagster.yaml's tag_concurrency_limits; sensor-launched pair
# runs wait (retry) for their author's environments instead of failing.
PROVIDER_TAG = "envduels/provider"
WAIT_TAG = "envduels/wait_for_author"
