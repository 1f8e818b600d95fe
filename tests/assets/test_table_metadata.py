"""Dagster's standard table metadata (``assets/shared.table_metadata``), read from the warehouse table itself.

The end-to-end assertion, every table asset of the code location after a real materialization, is in
``test_pipeline.py`` (``test_every_table_asset_reports_dagster_standard_table_metadata``).
"""

from __future__ import annotations

import dagster as dg
import pandas as pd
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.shared import TABLE_METADATA_KEYS, table_metadata
from envduels_dagster.core.storage.warehouse import replace_rows


def test_table_metadata_counts_the_partition_and_describes_the_columns(tmp_path):
    warehouse = DuckDBResource(database=str(tmp_path / "warehouse.duckdb"))
    rows = pd.DataFrame({"name": ["a", "b"], "model": ["envduels-sim/a", "envduels-sim/b"]})
    with warehouse.get_connection() as conn:
        replace_rows(conn, "model_registry", rows)
        by_conn = table_metadata(conn, "model_registry", {"name": "a"})
    md = table_metadata(warehouse, "model_registry")  # a resource: opens its own connection
    assert set(md) == set(TABLE_METADATA_KEYS)
    assert md["dagster/table_name"] == "warehouse.main.model_registry"  # the catalog is the file's stem
    assert md["dagster/row_count"] == 2 and by_conn["dagster/row_count"] == 1
    schema = md["dagster/column_schema"]
    assert isinstance(schema, dg.TableSchema)
    assert {c.name: c.type for c in schema.columns}["max_tokens"] == "INTEGER"


def test_table_version_is_the_content_without_run_columns(tmp_path):
    """Unchanged content keeps its data version whatever the row order, timestamps, latency or cache hits."""
    import datetime as dt

    from envduels_dagster.assets.shared import table_version

    warehouse = DuckDBResource(database=str(tmp_path / "warehouse.duckdb"))
    pair = {"author": "a", "solver": "b", "round": 0}

    def episodes(status, when, latency, cached):
        return pd.DataFrame({"env_id": ["e1", "e2"], "author": "a", "solver": "b", "round": 0,
                             "condition": ["cold", "hinted"], "seed": [0, 0], "status": status,
                             "materialized_at": when, "latency_s": latency, "cached_calls": cached})

    def version(df):
        with warehouse.get_connection() as conn:
            replace_rows(conn, "episodes", df, pair)
        return table_version(warehouse, "episodes", where=pair)

    first = version(episodes(["fail", "pass"], dt.datetime(2026, 1, 1), [1.0, 2.0], [0, 0]))
    replay = version(episodes(["fail", "pass"], dt.datetime(2026, 2, 1), [0.1, 0.2], [3, 3]).iloc[::-1].reset_index(drop=True))
    changed = version(episodes(["pass", "pass"], dt.datetime(2026, 2, 1), [0.1, 0.2], [3, 3]))
    assert isinstance(first, dg.DataVersion) and first == replay != changed


def test_dbt_events_get_table_metadata_after_the_build_and_a_failed_build_still_fails(tmp_path):
    """``dbt_marts`` holds dbt's events until dbt exits (DuckDB's lock), adds the metadata in order, re-raises."""
    from types import SimpleNamespace

    import pytest

    from envduels_dagster.assets.marts.dbt import with_table_metadata

    warehouse = DuckDBResource(database=str(tmp_path / "warehouse.duckdb"))
    with warehouse.get_connection() as conn:
        replace_rows(conn, "model_registry", pd.DataFrame({"name": ["a"], "model": ["envduels-sim/a"]}))
    key = dg.AssetKey("model_registry")
    spec = SimpleNamespace(metadata={"dagster/table_name": '"warehouse"."main"."model_registry"'})
    context = SimpleNamespace(assets_def=SimpleNamespace(specs_by_key={key: spec}),
                              asset_key_for_output=lambda name: key)
    check = dg.AssetCheckResult(asset_key=key, check_name="not_null", passed=False)

    def build():
        yield dg.Output(None, output_name="model_registry", metadata={"dbt": "kept"})
        yield check
        raise RuntimeError("dbt build failed")

    seen = []
    with pytest.raises(RuntimeError, match="dbt build failed"):
        for event in with_table_metadata(context, build(), warehouse):
            seen.append(event)
    output, checked = seen
    assert checked is check
    assert output.metadata["dbt"].value == "kept" and output.metadata["dagster/row_count"].value == 1
    assert output.metadata["dagster/table_name"].value == "warehouse.main.model_registry"


def test_display_table_rounds_each_estimate_to_what_its_interval_justifies():
    """The metadata tables people read (rankings, author_value, training_set): ``core.stats.rounding`` per row,
    by the row's own interval columns even when they are not shown; missing values as None; storage untouched."""
    import math

    from envduels_dagster.assets.shared import display_table

    rows = [{"learner": "a", "lift": 0.3333333, "lift_lower": 0.0123, "lift_upper": 0.61, "p_cold": 0.1234567,
             "n_seeds": 4}, {"learner": "b", "lift": math.nan, "lift_lower": None, "lift_upper": None,
                              "p_cold": 0.9999999999999999, "n_seeds": 2}]
    table = display_table(rows, [("learner", "string"), ("lift", "float"), ("lift_upper", "float"),
                                 ("p_cold", "float"), ("n_seeds", "int")], "training_set")
    assert [r.data for r in table.records] == [
        # 0.33 [0.0123, 0.61]: one decimal would print the lower bound 0.0123 as 0.0, and a positive lower bound
        # never prints as 0 (issue 42), so two decimals
        {"learner": "a", "lift": 0.33, "lift_upper": 0.61, "p_cold": 0.123, "n_seeds": 4},
        {"learner": "b", "lift": None, "lift_upper": None, "p_cold": 1.0, "n_seeds": 2}]
    assert rows[0]["lift"] == 0.3333333
