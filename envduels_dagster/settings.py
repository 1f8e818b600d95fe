"""Where state lives. Everything goes under ENVDUELS_HOME (default ./data).

Why one root: the warehouse, the call cache, the Dagster instance and the
exports move, back up and get deleted together. The directory is private
(0700) so sandboxed environment code, which runs as another uid, cannot read it.

These functions create the directory they return, so only code that runs (a step, the
CLI, the demo) calls them; loading the definitions never does (resources/paths.py
resolves its paths when a run starts).
"""

from __future__ import annotations

import os
from pathlib import Path


def envduels_home() -> Path:
    home = Path(os.environ.get("ENVDUELS_HOME") or "data").resolve()
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o700)
    return home


def warehouse_path() -> Path:
    return envduels_home() / "warehouse.duckdb"


def cache_path() -> Path:
    return envduels_home() / "cache" / "calls.sqlite"


def dagster_home() -> Path:
    """DAGSTER_HOME if set, else ENVDUELS_HOME/dagster (created with the project's dagster.yaml)."""
    path = Path(os.environ.get("DAGSTER_HOME") or envduels_home() / "dagster").resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path
