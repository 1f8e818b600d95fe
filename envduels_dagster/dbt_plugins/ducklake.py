"""A dbt-duckdb plugin that loads DuckLake's extensions from their PyPI wheels, by file path.

Why a plugin: dbt-duckdb's ``extensions:`` list runs ``INSTALL`` (which copies into ~/.duckdb, or
downloads) before ``LOAD``; a plugin's ``configure_connection`` runs before the profile's ``attach:``
and can ``LOAD '<path>'`` directly, with DuckDB's auto-install and auto-load (the internet) off.
Used by the ``shared`` target of dbt_project/profiles.yml; imports nothing of Dagster.
"""

from __future__ import annotations

from dbt.adapters.duckdb.plugins import BasePlugin


class Plugin(BasePlugin):
    def update_connection_config(self, creds, config) -> None:
        config["autoinstall_known_extensions"] = False
        config["autoload_known_extensions"] = False

    def configure_connection(self, conn) -> None:
        from envduels_dagster.core.storage.location import extension_file

        for name in ("postgres_scanner", "ducklake"):
            conn.execute(f"LOAD '{extension_file(name)}'")
