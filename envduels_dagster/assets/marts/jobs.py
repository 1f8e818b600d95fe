"""``downstream_job``: the registry table, the dbt marts and the analyses over them, once per request.

Launched by envduels_requests after every partition of a request landed (never on a fragment of
one). Everything here is unpartitioned, so it is one run; the multiprocess executor lets dbt and the
Python analyses that do not depend on each other overlap.
"""

import dagster as dg

from envduels_dagster.assets.registry.stage_end import STAGE_HOOKS

downstream_job = dg.define_asset_job(
    "downstream_job", hooks=STAGE_HOOKS,
    selection=(dg.AssetSelection.groups("marts")
               | dg.AssetSelection.assets("model_registry", "rankings", "design_convergence", "authoring_progress")),
    description="Refresh the registry table, the dbt marts and the rankings once a request's partitions landed.")
