"""The registry area: the ``model_registry`` asset and its checks.

Its sensor, ``envduels_requests`` (``sensors.py``), launches every other area's jobs, so the root
builds it once all areas' jobs are known (``envduels_dagster/definitions.py``).
"""

import dagster as dg

from envduels_dagster.assets.registry.assets import model_registry
from envduels_dagster.assets.registry.checks import model_registry_checks


def defs() -> dg.Definitions:
    return dg.Definitions(assets=[model_registry], asset_checks=[model_registry_checks])
