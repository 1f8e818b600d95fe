"""A dbt-duckdb plugin that attaches the warehouse file named by ``ENVDUELS_WAREHOUSE`` as ``warehouse``.

Why a plugin and not the profile's ``attach:``: dbt hashes the profile's connection settings, attach
paths included, to decide whether its saved parse is still valid, so a path rendered from an environment
variable made every build against another warehouse file (each test, each home) parse the whole project
again (a few seconds of CPU per mart refresh). Attached here, at connection time, the path is not part of
the profile and the saved parse is reused.

Waiting for the lock: DuckDB lets one process write the file. A Python step of the same run (the
multiprocess executor overlaps ``model_registry`` or ``authoring_progress`` with the dbt build) or a pair
run may hold it for a moment; dagster-duckdb's resource retries such conflicts, dbt-duckdb does not (its
``retries`` cover only the in-memory connect). So the attach is retried while the conflict is a lock, with
backoff, for up to ``LOCK_WAIT_S`` seconds, then fails with DuckDB's own message. Used by the ``warehouse``
target of dbt_project/profiles.yml; imports nothing of Dagster (the settings table only, for the variable).
"""

from __future__ import annotations

import time

import duckdb
from dbt.adapters.duckdb.plugins import BasePlugin

DEFAULT = "../data/warehouse.duckdb"  # the demo's file, relative to dbt_project/ (dbt runs there)
LOCK_WAIT_S = 120.0  # a pair's transaction or a Python mart holds the lock for seconds, not minutes


def attach_warehouse(conn, path: str, wait_s: float = LOCK_WAIT_S) -> None:
    """``ATTACH path AS warehouse`` on ``conn``, retried while another process holds the file's lock."""
    quoted = path.replace("'", "''")
    deadline, delay = time.monotonic() + wait_s, 0.2
    while True:
        try:
            conn.execute(f"ATTACH '{quoted}' AS warehouse")
            return
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


class Plugin(BasePlugin):
    def configure_connection(self, conn) -> None:
        from envduels_dagster.settings.variables import text_value  # the one table; read in dbt's process

        attach_warehouse(conn, text_value("ENVDUELS_WAREHOUSE") or DEFAULT)
