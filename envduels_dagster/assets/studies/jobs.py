"""``studies_job``: the lift -> learning study, the last stage of a request (after every learner)."""

import dagster as dg

from envduels_dagster.assets.registry.stage_end import STAGE_HOOKS

studies_job = dg.define_asset_job(
    "studies_job", hooks=STAGE_HOOKS, selection=dg.AssetSelection.assets("lift_learning", "experiment_report"),
    description="The lift -> learning study over every learner, then the experiment report (the last stage).")
