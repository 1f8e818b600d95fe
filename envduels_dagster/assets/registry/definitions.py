"""The registry area: the ``model_registry`` asset, its checks and the sensor that follows the registry file."""

import dagster as dg

from envduels_dagster.assets.registry.assets import model_registry
from envduels_dagster.assets.registry.checks import model_registry_checks
from envduels_dagster.assets.registry.sensors import new_models_sensor


def defs() -> dg.Definitions:
    return dg.Definitions(assets=[model_registry], asset_checks=[model_registry_checks], sensors=[new_models_sensor])
