"""``envduels_dagster.run_coordinator``: the path an existing dagster.yaml names (now ``envduels_dagster.instance.run_coordinator``)."""

from envduels_dagster.instance.run_coordinator import ProviderTaggedRunCoordinator

__all__ = ["ProviderTaggedRunCoordinator"]
