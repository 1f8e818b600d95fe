"""Resources whose file locations are resolved when a run starts, not when the definitions load.

Why: loading the code location must write nothing and fix no absolute path (the same
definitions serve the demo, the UI, tests and any ENVDUELS_HOME). An empty path means
"the default under ENVDUELS_HOME" (``settings.py``), resolved by the process that runs
the step; an explicit path (tests, operators' run config) is used as given. The storage
profile (ENVDUELS_STORAGE, docs/DEPLOY.md) picks the defaults: the DuckDB file and SQLite
cache, or the shared DuckLake warehouse and Postgres cache.
"""

from contextlib import contextmanager

from dagster_duckdb import DuckDBResource

from envduels_dagster.core.models.registry import Registry, load_registry
from envduels_dagster.resources.gateway import GatewayResource


def warehouse_file(warehouse: DuckDBResource) -> str:
    """The warehouse location behind ``warehouse``: its ``database`` or, when empty, the profile's
    (``$ENVDUELS_HOME/warehouse.duckdb``, or ``ducklake:postgres:<url>`` in the shared profile)."""
    if warehouse.database:
        return warehouse.database
    from envduels_dagster.settings import warehouse_location

    return warehouse_location()


def lake_data_path(warehouse: DuckDBResource) -> str:
    """Where a DuckLake warehouse's Parquet files go: the resource's ``lake_data_path`` or ENVDUELS_LAKE_DATA."""
    from envduels_dagster.settings import lake_data_path as default

    return getattr(warehouse, "lake_data_path", "") or default()


class WarehouseResource(DuckDBResource):
    """``DuckDBResource`` on the profile's warehouse unless ``database`` names another file or DuckLake."""

    database: str = ""
    lake_data_path: str = ""

    @contextmanager
    def get_connection(self):
        from envduels_dagster.core.storage.location import Warehouse, is_ducklake

        location = warehouse_file(self)
        if is_ducklake(location):  # several writers at once; conflicts retried by core/storage/warehouse.py
            conn = Warehouse(location, lake_data_path(self)).connect()
            try:
                yield conn
            finally:
                conn.close()
            return
        resolved = DuckDBResource(database=location, connection_config=self.connection_config)
        with resolved.get_connection() as conn:
            yield conn


class HomeGatewayResource(GatewayResource):
    """``GatewayResource`` whose registry defaults to ENVDUELS_REGISTRY (else ./models.yaml) and whose call
    cache defaults to the profile's ($ENVDUELS_HOME/cache/calls.sqlite, or Postgres), both read at run time."""

    registry_path: str = ""
    cache_path: str = ""

    def resolved(self) -> GatewayResource:
        from envduels_dagster.core.models.registry import registry_path
        from envduels_dagster.settings import cache_location

        fields = {name: getattr(self, name) for name in GatewayResource.model_fields}
        fields["registry_path"] = str(registry_path(self.registry_path or None))
        fields["cache_path"] = self.cache_path or cache_location()
        return GatewayResource(**fields)

    def registry(self) -> Registry:
        return load_registry(self.registry_path or None)

    def gateway(self, registry: Registry | None = None):
        return self.resolved().gateway(registry)
