"""Resources whose file locations are resolved when a run starts, not when the definitions load.

Why: loading the code location must write nothing and fix no absolute path (the same
definitions serve the demo, the UI, tests and any ENVDUELS_HOME). An empty path means
"the default under ENVDUELS_HOME" (``settings.py``), resolved by the process that runs
the step; an explicit path (tests, operators' run config) is used as given.
"""

from contextlib import contextmanager

from dagster_duckdb import DuckDBResource

from envduels_dagster.core.registry import Registry, load_registry
from envduels_dagster.resources.gateway import GatewayResource


def warehouse_file(warehouse: DuckDBResource) -> str:
    """The DuckDB file behind ``warehouse``: its ``database`` or, when empty, $ENVDUELS_HOME/warehouse.duckdb."""
    if warehouse.database:
        return warehouse.database
    from envduels_dagster.settings import warehouse_path

    return str(warehouse_path())


class WarehouseResource(DuckDBResource):
    """``DuckDBResource`` on $ENVDUELS_HOME/warehouse.duckdb unless ``database`` names another file."""

    database: str = ""

    @contextmanager
    def get_connection(self):
        resolved = DuckDBResource(database=warehouse_file(self), connection_config=self.connection_config)
        with resolved.get_connection() as conn:
            yield conn


class HomeGatewayResource(GatewayResource):
    """``GatewayResource`` whose registry defaults to ENVDUELS_REGISTRY (else ./models.yaml) and whose call
    cache defaults to $ENVDUELS_HOME/cache/calls.sqlite, both read at run time."""

    registry_path: str = ""
    cache_path: str = ""

    def resolved(self) -> GatewayResource:
        from envduels_dagster.core.registry import registry_path
        from envduels_dagster.settings import cache_path

        fields = {name: getattr(self, name) for name in GatewayResource.model_fields}
        fields["registry_path"] = str(registry_path(self.registry_path or None))
        fields["cache_path"] = self.cache_path or str(cache_path())
        return GatewayResource(**fields)

    def registry(self) -> Registry:
        return load_registry(self.registry_path or None)

    def gateway(self, registry: Registry | None = None):
        return self.resolved().gateway(registry)
