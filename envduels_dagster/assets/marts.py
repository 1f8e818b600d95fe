"""The dbt marts (``dbt_project/``) as Dagster assets: each dbt model an asset, each dbt test an asset check.

Three things here are about speed and offline use, not about the marts themselves:

* **The manifest.** ``@dbt_assets`` needs ``dbt_project/target/manifest.json`` when definitions load. The
  install step (``make install``: ``dbt parse``) writes it; when it is missing (a clean clone) or older than
  a file of the dbt project, :func:`ensure_manifest` re-parses once (offline, ~5-10 s) and swaps the new
  manifest in atomically, so concurrent loaders never read half a file.
* **Import time.** ``dagster_dbt`` imports dbt-core at import time only to read its version and a few
  enums, which costs ~1.5 s on every definitions load. dagster-dbt supports running without dbt-core in the
  orchestrating process (dbt is then only the CLI, as with dbt Fusion), so we import it with dbt-core hidden
  (:func:`_import_dagster_dbt`): loading stays fast, and dbt still runs as the venv's ``dbt`` executable.
* **No network at run time.** :class:`WarehouseDbtResource` reads the dbt version from package metadata
  instead of ``dbt --version`` (which asks pypi.org for the latest release) and skips building an
  in-process dbt adapter (only used to fetch column metadata, which we do not).

The dbt subprocess writes the same DuckDB file as the ``warehouse`` resource: the asset passes its path in
``ENVDUELS_WAREHOUSE`` (read by ``dbt_project/profiles.yml``). dbt holds the file's write lock for the
whole build, so do not run it concurrently with other writers.
"""

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from functools import cached_property
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.common import AFTER_PAIRS, OWNERS

DBT_PROJECT_DIR = Path(__file__).resolve().parents[2] / "dbt_project"
MANIFEST_PATH = DBT_PROJECT_DIR / "target" / "manifest.json"
_PROJECT_INPUTS = ("dbt_project.yml", "profiles.yml", "models", "tests", "macros")


def dbt_executable() -> str:
    """The venv's ``dbt`` (next to this interpreter), else whatever ``dbt`` is on PATH."""
    local = Path(sys.executable).with_name("dbt")
    return str(local) if local.exists() else (shutil.which("dbt") or "dbt")


def _newest_input_mtime() -> float:
    newest = 0.0
    for name in _PROJECT_INPUTS:
        path = DBT_PROJECT_DIR / name
        if path.is_file():
            newest = max(newest, path.stat().st_mtime)
        elif path.is_dir():
            for root, _dirs, files in os.walk(path):
                for f in files:
                    newest = max(newest, os.stat(os.path.join(root, f)).st_mtime)
    return newest


def manifest_is_current() -> bool:
    return MANIFEST_PATH.exists() and MANIFEST_PATH.stat().st_mtime >= _newest_input_mtime()


def parse_env() -> dict[str, str]:
    return {**os.environ, "DBT_PROFILES_DIR": str(DBT_PROJECT_DIR), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
            "DBT_LOG_PATH": str(DBT_PROJECT_DIR / "logs")}


def ensure_manifest(force: bool = False) -> Path:
    """Write ``target/manifest.json`` with ``dbt parse`` unless it is present and newer than the project."""
    if not force and manifest_is_current():
        return MANIFEST_PATH
    MANIFEST_PATH.parent.mkdir(parents=True, exist_ok=True)
    print(f"envduels: preparing the dbt manifest ({MANIFEST_PATH}) with `dbt parse`...", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(dir=MANIFEST_PATH.parent, prefix="parse-") as tmp:
        proc = subprocess.run([dbt_executable(), "parse", "--project-dir", str(DBT_PROJECT_DIR),
                               "--profiles-dir", str(DBT_PROJECT_DIR), "--target-path", tmp],
                              cwd=DBT_PROJECT_DIR, env=parse_env(), capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"`dbt parse` failed in {DBT_PROJECT_DIR}:\n{proc.stdout}\n{proc.stderr}")
        os.replace(Path(tmp) / "manifest.json", MANIFEST_PATH)
    return MANIFEST_PATH


def _import_dagster_dbt():
    """Import dagster_dbt without letting it import dbt-core into this process (see module docstring)."""
    if "dagster_dbt" in sys.modules or "dbt.version" in sys.modules:
        import dagster_dbt
        return dagster_dbt
    sys.modules["dbt.version"] = None  # type: ignore[assignment]  # makes `from dbt.version import ...` fail
    try:
        import dagster_dbt
    finally:
        if sys.modules.get("dbt.version", ...) is None:
            del sys.modules["dbt.version"]
    return dagster_dbt


_dagster_dbt = _import_dagster_dbt()
DbtCliResource = _dagster_dbt.DbtCliResource
DagsterDbtTranslator = _dagster_dbt.DagsterDbtTranslator


class WarehouseDbtResource(DbtCliResource):
    """``DbtCliResource`` for the project's dbt: version from package metadata, no in-process adapter."""

    @cached_property
    def _cli_version(self):
        from importlib.metadata import version as package_version

        from packaging.version import parse

        return parse(package_version("dbt-core"))

    def _initialize_dbt_core_adapter(self, args):
        return None


def dbt_resource() -> WarehouseDbtResource:
    """The ``dbt`` resource: this repository's dbt project, its in-project profiles.yml and the venv's dbt."""
    return WarehouseDbtResource(project_dir=str(DBT_PROJECT_DIR), profiles_dir=str(DBT_PROJECT_DIR),
                                dbt_executable=dbt_executable())


class MartsTranslator(DagsterDbtTranslator):
    """dbt models go in the ``marts`` group, owned by the team, refreshed by the automation sensor once the
    pairs they read have landed; sources keep their Python asset keys (set in ``models/sources.yml``)."""

    def get_automation_condition(self, dbt_resource_props):
        return AFTER_PAIRS

    def get_group_name(self, dbt_resource_props):
        return "marts"

    def get_owners(self, dbt_resource_props):
        return OWNERS

    def get_tags(self, dbt_resource_props):
        return {**super().get_tags(dbt_resource_props), "layer": "mart"}


@contextlib.contextmanager
def _environment(**values: str):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@_dagster_dbt.dbt_assets(manifest=ensure_manifest(), dagster_dbt_translator=MartsTranslator(), name="dbt_marts")
def dbt_marts(context: dg.AssetExecutionContext, dbt: DbtCliResource, warehouse: DuckDBResource):
    """``dbt build`` of the marts (models and their tests) on the warehouse file of the ``warehouse`` resource."""
    database = str(Path(warehouse.database).resolve())
    # dbt's artifacts (run_results, compiled SQL, logs) go to a scratch directory removed after the run;
    # the results themselves are in the Dagster event log.
    with tempfile.TemporaryDirectory(prefix="envduels-dbt-") as target:
        with _environment(ENVDUELS_WAREHOUSE=database, DBT_SEND_ANONYMOUS_USAGE_STATS="false"):
            invocation = dbt.cli(["build"], context=context, target_path=Path(target))  # env read at launch
        yield from invocation.stream()
