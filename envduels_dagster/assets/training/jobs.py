"""``learner_job``: one learner's training set, then (only if its blocking checks pass) its export.

Both assets in one run, so a failed blocking check on ``training_set`` stops the export in the same
run; the export's own write-audit-publish keeps ``latest`` on the last set that passed.
"""

import dagster as dg

learner_job = dg.define_asset_job(
    "learner_job", selection=dg.AssetSelection.assets("training_set", "training_export"),
    executor_def=dg.in_process_executor,
    description="One learner's training set, then (if its blocking checks pass) its export.")
