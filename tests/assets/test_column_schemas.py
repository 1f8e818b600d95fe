"""Every table asset shows its columns, each described, in the catalog (issue 32).

A table asset is one whose kinds name a table store (``duckdb``, ``parquet``): its definition carries
``dagster/column_schema`` (``assets/shared.documented_schema`` from ``core/storage/column_docs.py``, the export
contract's field descriptions, or the dbt models' schema.yml through dagster-dbt). Both the loaded definitions and the
committed snapshot (``tests/snapshots/code_location.json``, what a reviewer reads) are walked, so a new table asset
without descriptions fails here, whichever way it is added.
"""

from __future__ import annotations

import json

import dagster as dg
import pytest

from tests.code_location import SNAPSHOT

TABLE_KINDS = {"duckdb", "parquet"}


@pytest.fixture(scope="module")
def graph():
    from envduels_dagster.assets.marts.project import prepare_manifest
    from envduels_dagster.definitions import build_definitions

    prepare_manifest()  # the marts' columns come from the manifest: re-parsed when schema.yml is newer (else no-op)
    return build_definitions().resolve_asset_graph()


def undescribed(schema: dg.TableSchema | None) -> list[str] | None:
    """None without a schema (or with no column), else the columns without a description."""
    if schema is None or not schema.columns:
        return None
    return [c.name for c in schema.columns if not (c.description or "").strip()]


def test_every_table_asset_of_the_definitions_has_a_described_column_schema(graph):
    tables = {k.to_user_string(): graph.get(k) for k in graph.get_all_asset_keys()
              if graph.get(k).is_materializable and TABLE_KINDS & set(graph.get(k).kinds)}
    assert {"model_registry", "authored_environments", "duel_episodes", "design_convergence", "authoring_progress",
            "lift_learning", "author_value", "rankings", "training_set", "training_export", "pair_lift",
            "env_solver_stats", "duels"} <= set(tables)
    problems = {}
    for name, node in sorted(tables.items()):
        missing = undescribed((node.metadata or {}).get("dagster/column_schema"))
        if missing is None:
            problems[name] = "no dagster/column_schema"
        elif missing:
            problems[name] = f"columns without a description: {missing}"
    assert not problems, problems


@pytest.mark.parametrize(("asset", "companion", "first"), [("author_value", "author_value_mix", "learner"),
                                                          ("rankings", "rankings_summary", "n_models"),
                                                          ("design_convergence", "design_convergence_clusters",
                                                           "cluster_id")])
def test_companion_tables_written_by_an_asset_are_described_beside_it(graph, asset, companion, first):
    """An asset that writes a second table shows that table's columns in its definition metadata too."""
    schema = graph.get(dg.AssetKey(asset)).metadata[f"{companion} columns"].schema
    assert schema.columns[0].name == first and undescribed(schema) == []


def test_every_table_asset_of_the_snapshot_lists_described_columns():
    assets = json.loads(SNAPSHOT.read_text())["assets"]
    tables = {name: a for name, a in assets.items() if TABLE_KINDS & set(a["kinds"])}
    assert len(tables) >= 15
    problems = {name: "no columns" if not a.get("columns") else [c for c, text in a["columns"].items() if not text]
                for name, a in tables.items()}
    assert not {k: v for k, v in problems.items() if v}, problems


def test_definition_types_match_the_warehouse_schema(graph):
    """The definition's types are given by column name (building the definitions must not import pandas); they are
    the contract's DuckDB types for every column of the warehouse tables the assets write."""
    from envduels_dagster.core.storage.warehouse import SCHEMA, _columns

    writers = {"model_registry": "model_registry", "authored_environments": "environments",
               "duel_episodes": "episodes", "authoring_progress": "authoring_progress",
               "lift_learning": "lift_learning", "author_value": "author_value", "training_set": "training_set"}
    for asset, table in writers.items():
        declared = {c.name: c.type for c in graph.get(dg.AssetKey(asset)).metadata["dagster/column_schema"].columns}
        contract = {c.split()[0]: c.split()[1].lower() for c in _columns(table)}
        assert table in SCHEMA and {n: declared.get(n) for n in contract} == contract, asset


def test_a_materialized_table_keeps_the_descriptions_in_its_schema(tmp_path):
    """The materialization's schema (real DuckDB types) carries the same descriptions; a dbt model's come from its
    definition (schema.yml), passed in by ``dbt_marts``."""
    import pandas as pd
    from dagster_duckdb import DuckDBResource

    from envduels_dagster.assets.shared import table_metadata
    from envduels_dagster.core.storage.warehouse import replace_rows

    warehouse = DuckDBResource(database=str(tmp_path / "warehouse.duckdb"))
    with warehouse.get_connection() as conn:
        replace_rows(conn, "model_registry", pd.DataFrame({"name": ["a"], "model": ["envduels-sim/a"]}))
        conn.execute("CREATE TABLE solver_scores AS SELECT 0 AS round, 'a' AS solver")
        registry = table_metadata(conn, "model_registry")["dagster/column_schema"]
        mart = table_metadata(conn, "solver_scores", descriptions={"round": "The round."})["dagster/column_schema"]
    assert undescribed(registry) == []
    assert {c.name: c.description for c in mart.columns} == {"round": "The round.", "solver": None}
