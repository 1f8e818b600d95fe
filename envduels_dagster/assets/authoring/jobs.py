"""``author_job``: one model's authoring, the first stage of a request (envduels_requests).

``import_job``: the same asset for an ``import:<name>`` partition, run by ``envduels import`` (its own
name so that imports are easy to find in the UI's run list).
"""

import dagster as dg

from envduels_dagster.assets.registry.stage_end import STAGE_HOOKS

# Request stages run one or two steps per run (the asset, its checks): executing them in the run's own
# process spares a forkserver start (~5 s of imports) per run, for no lost parallelism.
author_job = dg.define_asset_job(
    "author_job", selection=dg.AssetSelection.assets("authored_environments"), executor_def=dg.in_process_executor,
    hooks=STAGE_HOOKS,
    description="Author and validate one model's environments.")

import_job = dg.define_asset_job(
    "import_job", selection=dg.AssetSelection.assets("authored_environments"), executor_def=dg.in_process_executor,
    tags={"envduels/import": "true"},
    description="Import a staged EnvDuels export as author partition import:<name> (run by `envduels import`); "
                "config ops.authored_environments.config.export_dir, empty for the staged copy.")
