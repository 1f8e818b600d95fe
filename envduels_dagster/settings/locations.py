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

from envduels_dagster.settings.variables import postgres_url_of, text_value, value


def home_dir() -> Path:
    """ENVDUELS_HOME (default ./data) without creating it: loading the definitions reads, never writes."""
    return Path(text_value("ENVDUELS_HOME") or "data").resolve()


def envduels_home() -> Path:
    """ENVDUELS_HOME, created (0700) when missing."""
    home = home_dir()
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o700)
    return home


def registry_file(path: str | Path | None = None) -> Path:
    """The model registry: ``path``, else ENVDUELS_REGISTRY, else the registry the experiment under ENVDUELS_HOME
    stored (its first run wrote it: core/storage/experiment_file.py), else ./models.yaml (the checkout's, or the
    copy an installed wheel carries). Reads, never creates; ExperimentFileError when the stored file is bad."""
    from envduels_dagster.core.models.registry import DEFAULT_REGISTRY
    from envduels_dagster.core.storage.experiment_file import stored_registry

    return Path(path or text_value("ENVDUELS_REGISTRY") or stored_registry(home_dir()) or DEFAULT_REGISTRY)


def warehouse_path() -> Path:
    return envduels_home() / "warehouse.duckdb"


def cache_path() -> Path:
    return envduels_home() / "cache" / "calls.sqlite"


def dagster_home() -> Path:
    """DAGSTER_HOME if set, else ENVDUELS_HOME/dagster (created with the project's dagster.yaml)."""
    path = Path(os.environ.get("DAGSTER_HOME") or envduels_home() / "dagster").resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


# Storage profiles (docs/DEPLOY.md). `embedded` (the default): the files above. `shared`: the Dagster
# instance, the call cache and the DuckLake catalog of the warehouse on the Postgres server of
# ENVDUELS_POSTGRES_URL, the warehouse's Parquet files under ENVDUELS_LAKE_DATA. The choices are written once,
# in the settings table (variables.py).
def storage_profile() -> str:
    return str(value("ENVDUELS_STORAGE"))


def postgres_url() -> str:
    """ENVDUELS_POSTGRES_URL as libpq reads it (variables.py; SettingsError, a ValueError, when unset or not one)."""
    return postgres_url_of(text_value("ENVDUELS_POSTGRES_URL") or "")


def warehouse_location() -> str:
    """The warehouse for this profile: the DuckDB file, or ``ducklake:postgres:<url>`` (core/storage/location.py)."""
    if storage_profile() == "shared":
        return "ducklake:postgres:" + postgres_url()
    return str(warehouse_path())


def lake_data_path() -> str:
    """Where the shared warehouse's Parquet files go: ENVDUELS_LAKE_DATA (a directory every writer sees)."""
    path = text_value("ENVDUELS_LAKE_DATA") or str(envduels_home() / "lake")
    return path if "://" in path else str(Path(path).resolve()) + "/"


def cache_location() -> str:
    """The call cache for this profile: the SQLite file, or the Postgres URL (core/models/pg_call_cache.py)."""
    return postgres_url() if storage_profile() == "shared" else str(cache_path())


def warehouse():
    """This profile's warehouse as a ``core.storage.location.Warehouse`` (``.connect()`` opens it)."""
    from envduels_dagster.core.storage.location import Warehouse, is_ducklake

    location = warehouse_location()
    return Warehouse(location, lake_data_path() if is_ducklake(location) else "")
