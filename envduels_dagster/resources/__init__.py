"""Dagster resources: thin, configurable wrappers around the pure engine."""

from envduels_dagster.resources.duel_settings import DuelSettings
from envduels_dagster.resources.gateway import GatewayResource
from envduels_dagster.resources.paths import HomeGatewayResource, WarehouseResource
from envduels_dagster.resources.sandbox import SandboxResource

__all__ = ["DuelSettings", "GatewayResource", "HomeGatewayResource", "SandboxResource", "WarehouseResource"]
