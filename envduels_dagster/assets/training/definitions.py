"""The training area: ``training_set`` [learner] and ``training_export`` [learner], both guarded by blocking checks."""

import dagster as dg

from envduels_dagster.assets.training.assets import training_export, training_set
from envduels_dagster.assets.training.checks import training_export_checks, training_set_checks
from envduels_dagster.assets.training.jobs import learner_job


def defs() -> dg.Definitions:
    return dg.Definitions(assets=[training_set, training_export],
                          asset_checks=[training_set_checks, training_export_checks], jobs=[learner_job])
