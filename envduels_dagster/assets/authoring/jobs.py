"""``author_job``: one model's authoring, the first stage of a request (envduels_requests)."""

import dagster as dg

# Request stages run one or two steps per run (the asset, its checks): executing them in the run's own
# process spares a forkserver start (~5 s of imports) per run, for no lost parallelism.
author_job = dg.define_asset_job(
    "author_job", selection=dg.AssetSelection.assets("authored_environments"), executor_def=dg.in_process_executor,
    description="Author and validate one model's environments.")
