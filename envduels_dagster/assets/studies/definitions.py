"""The studies area: analyses that use the product (``lift_learning``)."""

import dagster as dg

from envduels_dagster.assets.studies.assets import lift_learning
from envduels_dagster.assets.studies.jobs import studies_job


def defs() -> dg.Definitions:
    return dg.Definitions(assets=[lift_learning], jobs=[studies_job])
