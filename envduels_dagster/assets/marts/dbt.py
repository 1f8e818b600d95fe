"""The dbt marts as Dagster assets: each dbt model an asset, each dbt test an asset check.

Why this shape: dagster-dbt builds the assets from the manifest of :func:`marts_project`;
nothing here runs at import time, and this module is imported only when the marts area's
``defs()`` is called. dbt-core stays out of this process (``project.import_dagster_dbt``):
dbt runs as the ``envduels-dbt`` executable, and :class:`MartsDbtCliResource` skips the
in-process dbt adapter, which dagster-dbt builds only to fetch column metadata (we fetch
none) and which would need dbt-core here. The dbt subprocess
writes the same DuckDB file as the ``warehouse`` resource: the asset passes its path in
``ENVDUELS_WAREHOUSE`` (read by the dbt plugin ``envduels_dagster/dbt_plugins/warehouse.py``) through the invocation's own
environment, with this process's pid so that dbt dies with it (``dbt_cli.die_with_parent``). dbt holds the file's write lock for the whole build, so do not run it
concurrently with other writers.

Standard table metadata: dagster-dbt's ``fetch_row_counts()`` / ``fetch_column_metadata()`` query
through that in-process adapter, so they cannot work here. Instead the build's events are held
until dbt exits (it holds the DuckDB lock until then; dagster-dbt does the same for DuckDB), and
each model's materialization gets its row count, real column schema and table name read from the
warehouse (:func:`with_table_metadata`). The definition-time schema comes from the manifest
(dagster-dbt puts the documented columns in each spec's ``dagster/column_schema``).
"""

import contextlib
import os
import tempfile
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.marts.dbt_cli import PARENT_VAR, offline_dbt_executable
from envduels_dagster.assets.marts.project import import_dagster_dbt, marts_project
from envduels_dagster.assets.shared import OWNERS, table_metadata
from envduels_dagster.resources.paths import lake_data_path, warehouse_file

_dagster_dbt = import_dagster_dbt()
DagsterDbtTranslator, DbtCliResource, dbt_assets = (_dagster_dbt.DagsterDbtTranslator, _dagster_dbt.DbtCliResource,
                                                    _dagster_dbt.dbt_assets)


class MartsDbtCliResource(DbtCliResource):
    """``DbtCliResource`` without the in-process dbt adapter (dbt-core is not imported here, see above).

    The one dagster-dbt internal we override: without it every ``dbt build`` would import
    dbt-core into the step process only to fail building an adapter and log a traceback.
    """

    def _initialize_dbt_core_adapter(self, args):
        return None


def dbt_resource() -> DbtCliResource:
    """The ``dbt`` resource: this repository's dbt project, its in-project profiles.yml, dbt with offline --version."""
    project = marts_project()
    return MartsDbtCliResource(project_dir=project, profiles_dir=str(project.profiles_dir),
                               dbt_executable=offline_dbt_executable())


class MartsTranslator(DagsterDbtTranslator):
    """dbt models go in the ``marts`` group, owned by the team; sources keep their Python asset keys (set in
    ``models/sources.yml``). No automation condition: envduels_requests refreshes the marts once per request,
    after every partition of it landed (``downstream_job``)."""

    def get_automation_condition(self, dbt_resource_props):
        return None

    def get_group_name(self, dbt_resource_props):
        return "marts"

    def get_owners(self, dbt_resource_props):
        return OWNERS

    def get_tags(self, dbt_resource_props):
        return {**super().get_tags(dbt_resource_props), "layer": "mart"}

    def get_asset_check_spec(self, asset_spec, manifest, unique_id, project):
        """dbt's own check, with a description a reader understands: dbt names a generic test after its arguments
        and cuts it (``value_between_…t_lower__1___1``, issue 43); the UI shows this sentence under the name."""
        spec = super().get_asset_check_spec(asset_spec, manifest, unique_id, project)
        if spec is None or spec.description:
            return spec
        node = manifest.get("nodes", {}).get(unique_id, {})
        return spec._replace(description=describe_test(node))


def describe_test(node: dict) -> str:
    """One sentence for a dbt test node: its yml description, else what its generic test asserts."""
    if node.get("description"):
        return str(node["description"])
    meta = node.get("test_metadata") or {}
    kw = {k: v for k, v in (meta.get("kwargs") or {}).items() if k != "model"}
    col = kw.get("column_name", "")
    words = {
        "not_null": lambda: f"{col} is never null",
        "unique": lambda: f"{col} is unique",
        "value_between": lambda: f"{col} is between {kw.get('min_value')} and {kw.get('max_value')} (or null)",
        "unique_combination": lambda: f"one row per ({', '.join(map(str, kw.get('columns', [])))})",
        "expression_holds": lambda: f"every row satisfies: {kw.get('expression')}",
        "interval_contains": lambda: (f"{kw.get('lower')} <= {col} <= {kw.get('upper')} wherever the interval is "
                                      f"published ({kw.get('reason')} says why where it is not)"),
        "accepted_values": lambda: f"{col} is one of {', '.join(map(str, kw.get('values', [])))}",
        "relationships": lambda: f"{col} refers to an existing {kw.get('to')} row ({kw.get('field')})",
    }
    name = str(meta.get("name") or node.get("name", "test"))
    return words[name]() if name in words else f"dbt test {name}" + (f" on {col}" if col else "")


@contextlib.contextmanager
def _environment(**values: str):
    """Set ``values`` in os.environ for the block: DbtCliResource.cli passes os.environ to the dbt process."""
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


def build_dbt_marts() -> dg.AssetsDefinition:
    """``dbt_marts``: ``dbt build`` of the marts (models and their tests) on the ``warehouse`` resource's file."""
    project = marts_project()

    @dbt_assets(manifest=project.manifest_path, project=project, dagster_dbt_translator=MartsTranslator(),
                name="dbt_marts")
    def dbt_marts(context: dg.AssetExecutionContext, dbt: DbtCliResource, warehouse: DuckDBResource):
        from envduels_dagster.core.storage.location import is_ducklake

        location = warehouse_file(warehouse)
        # The profile's dbt target (dbt_project/profiles.yml): the DuckDB file, or the shared DuckLake.
        env = ({"ENVDUELS_WAREHOUSE": location, "ENVDUELS_DBT_TARGET": "shared",
                "ENVDUELS_LAKE_DATA": lake_data_path(warehouse)} if is_ducklake(location) else
               {"ENVDUELS_WAREHOUSE": str(Path(location).resolve()), "ENVDUELS_DBT_TARGET": "warehouse"})
        # dbt's artifacts (run_results, compiled SQL, logs) go to a scratch directory removed after the run;
        # the results themselves are in the Dagster event log.
        with tempfile.TemporaryDirectory(prefix="envduels-dbt-") as target:
            with _environment(**env, DBT_SEND_ANONYMOUS_USAGE_STATS="false", **{PARENT_VAR: str(os.getpid())}):
                invocation = dbt.cli(["build"], context=context, target_path=Path(target))  # env read at launch
            yield from with_table_metadata(context, invocation.stream(), warehouse)

    return dbt_marts


def with_table_metadata(context: dg.AssetExecutionContext, events, warehouse: DuckDBResource):
    """``events`` in their order, once dbt has exited, each model's materialization carrying the standard
    table metadata of its table (read from ``warehouse``). A failed build still reports what it built,
    then fails the step with dbt's error."""
    held, error = [], None
    try:
        held.extend(events)
    except Exception as exc:  # dbt failed (a model or a test): its error is raised after the events
        error = exc

    def key_of(event) -> dg.AssetKey | None:
        if isinstance(event, dg.AssetMaterialization):
            return event.asset_key
        return context.asset_key_for_output(event.output_name) if isinstance(event, dg.Output) else None

    def table_of(key: dg.AssetKey) -> str:  # the model's relation, e.g. "warehouse"."main"."pair_lift"
        relation = context.assets_def.specs_by_key[key].metadata.get("dagster/table_name") or key.path[-1]
        return str(relation).split(".")[-1].strip('"')

    def described(key: dg.AssetKey) -> dict[str, str]:  # the model's column descriptions (its schema.yml)
        schema = context.assets_def.specs_by_key[key].metadata.get("dagster/column_schema")
        return {c.name: c.description for c in schema.columns if c.description} if schema is not None else {}

    keys = {key for key in map(key_of, held) if key is not None}
    metadata = {}
    if keys:
        with warehouse.get_connection() as conn:
            metadata = {key: table_metadata(conn, table_of(key), descriptions=described(key)) for key in keys}
    for event in held:
        key = key_of(event)
        yield event if key is None else event.with_metadata({**event.metadata, **metadata[key]})
    if error is not None:
        raise error
