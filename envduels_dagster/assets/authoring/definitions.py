"""The authoring area: round-0 ``authored_environments`` [author], its checks, ``author_job`` and ``import_job``."""

import dagster as dg

from envduels_dagster.assets.authoring.assets import authored_environments
from envduels_dagster.assets.authoring.checks import make_environments_checks
from envduels_dagster.assets.authoring.jobs import author_job, import_job


def defs() -> dg.Definitions:
    return dg.Definitions(assets=[authored_environments], asset_checks=[make_environments_checks(authored_environments)],
                          jobs=[author_job, import_job])
