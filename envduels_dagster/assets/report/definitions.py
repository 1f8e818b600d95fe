"""The report area: ``experiment_report``, the one page a researcher opens (``envduels report``).

Why an area of its own: it reads every other area's results and writes only files under
``$ENVDUELS_HOME/reports/experiment/``; it computes no statistic. It runs in a request's last stage
(``studies_job``), after every learner's ``author_value`` and ``training_set``.
"""

import dagster as dg

from envduels_dagster.assets.report.assets import experiment_report
from envduels_dagster.assets.report.checks import report_self_contained_and_matches_tables


def defs() -> dg.Definitions:
    return dg.Definitions(assets=[experiment_report], asset_checks=[report_self_contained_and_matches_tables])
