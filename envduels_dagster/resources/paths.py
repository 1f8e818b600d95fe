"""Resources whose file locations are resolved when a run starts, not when the definitions load.

Why: loading the code location must write nothing and fix no absolute path (the same
definitions serve the demo, the UI, tests and any ENVDUELS_HOME). An empty path means
"the default under ENVDUELS_HOME" (``settings.py``), resolved by the process that runs
the step; an explicit path (tests, operators' run config) is used as given. The storage
profile (ENVDUELS_STORAGE, docs/DEPLOY.md) picks the defaults: the DuckDB file and SQLite
cache, or the shared DuckLake warehouse and Postgres cache.
"""

from contextlib import contextmanager

import dagster as dg
from dagster_duckdb import DuckDBResource
from pydantic import PrivateAttr

from envduels_dagster.core.models.registry import Registry, load_registry
from envduels_dagster.resources.gateway import GatewayResource


def warehouse_file(warehouse: DuckDBResource) -> str:
    """The warehouse location behind ``warehouse``: its ``database`` or, when empty, the profile's
    (``$ENVDUELS_HOME/warehouse.duckdb``, or ``ducklake:postgres:<url>`` in the shared profile)."""
    if warehouse.database:
        return warehouse.database
    from envduels_dagster.settings.locations import warehouse_location

    return warehouse_location()


def lake_data_path(warehouse: DuckDBResource) -> str:
    """Where a DuckLake warehouse's Parquet files go: the resource's ``lake_data_path`` or ENVDUELS_LAKE_DATA."""
    from envduels_dagster.settings.locations import lake_data_path as default

    return getattr(warehouse, "lake_data_path", "") or default()


class WarehouseResource(DuckDBResource):
    """``DuckDBResource`` on the profile's warehouse unless ``database`` names another file or DuckLake.

    The warehouse schema is checked once per run (issue 35): once a connection of this run passed
    ``ensure_schema``, the run's later connections to the same location are vouched for
    (``mark_schema_checked``), and reads and writes skip the catalog queries. Connections stay short
    (one per use): a DuckDB file admits one writer process at a time, and other runs and dbt wait on it.
    """

    database: str = ""
    lake_data_path: str = ""
    # Locations this run checked; None outside a run (direct use, tests): then nothing is vouched for.
    _schema_checked: set | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:  # noqa: ARG002 - Dagster's hook
        self._schema_checked = set()  # per run: a later run checks again (the file may be new)

    @contextmanager
    def get_connection(self):
        from envduels_dagster.core.storage.location import Warehouse, is_ducklake
        from envduels_dagster.core.storage.warehouse import is_schema_checked, mark_schema_checked

        location = warehouse_file(self)

        @contextmanager
        def vouched(conn):
            checked = self._schema_checked
            if checked is not None and location in checked:
                mark_schema_checked(conn)
            yield conn
            if checked is not None and is_schema_checked(conn):
                checked.add(location)

        if is_ducklake(location):  # several writers at once; conflicts retried by core/storage/warehouse.py
            conn = Warehouse(location, lake_data_path(self)).connect()
            try:
                with vouched(conn):
                    yield conn
            finally:
                conn.close()
            return
        resolved = DuckDBResource(database=location, connection_config=self.connection_config)
        with resolved.get_connection() as conn, vouched(conn):
            yield conn


class HomeGatewayResource(GatewayResource):
    """``GatewayResource`` whose registry defaults to ENVDUELS_REGISTRY (else ./models.yaml) and whose call
    cache defaults to the profile's ($ENVDUELS_HOME/cache/calls.sqlite, or Postgres), both read at run time."""

    registry_path: str = ""
    cache_path: str = ""

    def resolved(self) -> GatewayResource:
        from envduels_dagster.settings.locations import cache_location, registry_file

        fields = {name: getattr(self, name) for name in GatewayResource.model_fields}
        fields["registry_path"] = str(registry_file(self.registry_path or None))
        fields["cache_path"] = self.cache_path or cache_location()
        return GatewayResource(**fields)

    def registry(self) -> Registry:
        from envduels_dagster.settings.locations import registry_file

        return load_registry(registry_file(self.registry_path or None))

    def gateway(self, registry: Registry | None = None):
        return self.resolved().gateway(registry)
