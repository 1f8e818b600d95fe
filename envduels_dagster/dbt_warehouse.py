"""A dbt-duckdb plugin that attaches the warehouse file named by ``ENVDUELS_WAREHOUSE`` as ``warehouse``.

Why a plugin and not the profile's ``attach:``: dbt hashes the profile's connection settings, attach
paths included, to decide whether its saved parse is still valid, so a path rendered from an environment
variable made every build against another warehouse file (each test, each home) parse the whole project
again (a few seconds of CPU per mart refresh). Attached here, at connection time, the path is not part of
the profile and the saved parse is reused. Used by the ``warehouse`` target of dbt_project/profiles.yml;
imports nothing of Dagster.
"""

from __future__ import annotations

import os

from dbt.adapters.duckdb.plugins import BasePlugin

DEFAULT = "../data/warehouse.duckdb"  # the demo's file, relative to dbt_project/ (dbt runs there)


class Plugin(BasePlugin):
    def configure_connection(self, conn) -> None:
        path = os.environ.get("ENVDUELS_WAREHOUSE") or DEFAULT
        quoted = path.replace("'", "''")
        conn.execute(f"ATTACH '{quoted}' AS warehouse")
