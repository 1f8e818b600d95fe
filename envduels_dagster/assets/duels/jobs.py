"""``pair_job``: one (author, solver) pair, one stage of a request (envduels_requests) runs one per pair.

A job may not mix partitions definitions, hence one job per area rather than one for both.
"""

import dagster as dg

from envduels_dagster.assets.registry.stage_end import STAGE_HOOKS

# Request stages run one or two steps per run (the asset, its checks): executing them in the run's own
# process spares a forkserver start (~5 s of imports) per run, for no lost parallelism.
pair_job = dg.define_asset_job(
    "pair_job", selection=dg.AssetSelection.assets("duel_episodes"), executor_def=dg.in_process_executor,
    hooks=STAGE_HOOKS,
    description="Play one (author, solver) pair.")
