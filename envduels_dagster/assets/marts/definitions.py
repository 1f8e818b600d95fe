"""The marts area: the dbt marts (models = assets, tests = checks), the ``pair_lift`` suite, and the Python
analyses over the marts (``rankings``, ``design_convergence``)."""

import dagster as dg

from envduels_dagster.assets.checking.results import make_result_checks
from envduels_dagster.assets.marts.assets import design_convergence, rankings
from envduels_dagster.assets.marts.checks import pair_lift_checks
from envduels_dagster.assets.marts.jobs import downstream_job


def defs() -> dg.Definitions:
    from envduels_dagster.assets.marts.dbt import build_dbt_marts  # dagster-dbt (and dbt-core): imported on demand

    # The `dbt` resource is one of the root's shared resources (definitions.build_resources).
    checks = [pair_lift_checks, make_result_checks("rankings"), make_result_checks("design_convergence")]
    return dg.Definitions(assets=[build_dbt_marts(), rankings, design_convergence], asset_checks=checks,
                          jobs=[downstream_job])
