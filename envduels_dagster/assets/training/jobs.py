"""``learner_job``: one learner's training set, then (only if its blocking checks pass) its export.

Both assets in one run, so a failed blocking check on ``training_set`` stops the export in the same
run; the export's own write-audit-publish keeps ``latest`` on the last set that passed.

The same run refreshes the learner's ``author_value`` (the value area): it is per learner too, reads
what the training set reads, and a request's "learners" stage is this job. It does not depend on the
training set, so a failed blocking check there does not stop it.
"""

import dagster as dg

from envduels_dagster.assets.registry.stage_end import STAGE_HOOKS

learner_job = dg.define_asset_job(
    "learner_job", selection=dg.AssetSelection.assets("training_set", "training_export", "author_value"),
    hooks=STAGE_HOOKS,
    executor_def=dg.in_process_executor,
    description="One learner's training set, then (if its blocking checks pass) its export; and its "
                "author_value (which author to pay).")
