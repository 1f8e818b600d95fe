"""Write-audit-publish of the published snapshots: readers only ever see sets that passed their checks.

Real runs on one instance (simulated models, sandboxed play, real DuckDB): a materialization only stages
its snapshot (keyed by its run id, outside every table folder); the asset's checks publish it when they all
pass and discard it when one fails. Every documented reader — ``consumer`` in another code location,
``load_asset_value`` in this one, pandas and a DuckDB glob over the published folder — sees the last
passing set, whose rows name the run that produced them. ``consumer.RANKINGS`` loads the same way.
"""

import os
import warnings

import dagster as dg
import duckdb
import pandas as pd
import pytest
from dagster_duckdb import DuckDBResource

from envduels_dagster import consumer
from envduels_dagster.assets.checking.results import make_result_checks
from envduels_dagster.assets.marts.assets import rankings
from envduels_dagster.assets.marts.dbt import build_dbt_marts
from envduels_dagster.assets.registry.partitions import solver_partitions
from envduels_dagster.assets.training.assets import training_set
from envduels_dagster.assets.training.checks import training_set_checks
from envduels_dagster.core.storage.warehouse import read_table, replace_rows
from envduels_dagster.core.training.publication import STAGED, content_version, describe, snapshot_path
from envduels_dagster.resources.io_managers import PUBLISHED_IO_MANAGER_KEY
from tests.helpers.pipeline import pipeline_resources, play_round0, write_registry

pytestmark = pytest.mark.slow  # real pipeline runs: outside the `-m 'not slow'` loop

MODELS = ["oracle", "expert", "novice"]


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("publish")
    home = tmp / "home"
    old = os.environ.get("ENVDUELS_HOME")
    os.environ["ENVDUELS_HOME"] = str(home)
    resources = pipeline_resources(tmp, write_registry(tmp / "models.yaml", MODELS), 3, (0, 1),
                                   training_admission="rule")
    (tmp / "dagster").mkdir()
    try:
        with dg.instance_for_test(temp_dir=str(tmp / "dagster")) as instance:
            play_round0(instance, resources, MODELS)
            # every learner's first set (passing), to pick one whose set has rows (the simulation decides)
            sizes, runs = {}, {}
            for m in MODELS:
                result = dg.materialize([training_set, training_set_checks], instance=instance,
                                        resources=resources, partition_key=m)
                assert result.success and all(e.passed for e in result.get_asset_check_evaluations())
                assert {e.metadata["publication"].value for e in result.get_asset_check_evaluations()} == {"published"}
                sizes[m], runs[m] = len(result.output_for_node("training_set")), result.run_id
            learner = max(sizes, key=sizes.get)
            assert sizes[learner] > 0, sizes
            yield instance, resources, home / "published", learner, runs[learner]
    finally:
        if old is None:
            os.environ.pop("ENVDUELS_HOME", None)
        else:
            os.environ["ENVDUELS_HOME"] = old


def rewritten(kind: str) -> dg.AssetsDefinition:
    """A ``training_set`` through the publishing IO manager whose rows are the real ones made ``kind``:
    "corrupted" (the learner's own environment slips in: a blocking check fails) or "empty" (passes)."""
    @dg.asset(name="training_set", partitions_def=solver_partitions, io_manager_key=PUBLISHED_IO_MANAGER_KEY)
    def rewritten_training_set(context: dg.AssetExecutionContext, warehouse: DuckDBResource):
        learner = context.partition_key
        with warehouse.get_connection() as conn:
            rows = read_table(conn, "training_set", {"learner": learner})
            own = read_table(conn, "environments", {"author": learner}).iloc[0]
            bad = rows.iloc[:0].copy()
            if kind == "corrupted":
                bad.loc[0] = {**{c: None for c in rows.columns}, "learner": learner, "env_id": own["env_id"],
                              "author": learner, "domain": own["domain"], "class_name": own["class_name"],
                              "max_turns": own["max_turns"], "source_sha256": own["source_sha256"],
                              "hint": own["hint"], "benchmark_seeds": [0, 1], "n_seeds": 2, "p_cold": 0.0,
                              "p_hint": 1.0, "lift": 1.0, "lift_lower": 1.0, "lift_upper": 1.0, "rank": 1}
            replace_rows(conn, "training_set", bad, {"learner": learner})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return dg.Output(bad, data_version=dg.DataVersion(content_version(bad)))

    return rewritten_training_set


def readers(instance, resources, root, learner) -> dict[str, pd.DataFrame]:
    """The learner's rows as each documented reader gets them."""
    producer = dg.Definitions(assets=[training_set], asset_checks=[training_set_checks], resources=resources)
    other_location = dg.Definitions(assets=[consumer.TRAINING_SET], resources=consumer.resources())
    path = snapshot_path(root, "training_set", learner)
    with duckdb.connect() as conn:
        glob = conn.execute(f"SELECT * FROM '{root}/training_set/*.parquet' WHERE learner = ?", [learner]).df()
    return {
        "load_asset_value": producer.load_asset_value("training_set", partition_key=learner, instance=instance),
        "consumer": other_location.load_asset_value("training_set", partition_key=learner, instance=instance),
        "pandas": pd.read_parquet(path),
        "duckdb": glob,
    }


def assert_published(instance, resources, root, learner, run_id: str,
                     n_rows: int | None = None) -> pd.DataFrame:
    seen = readers(instance, resources, root, learner)
    first = seen["consumer"]
    for name, df in seen.items():
        assert len(df) == len(first) and list(df["env_id"]) == list(first["env_id"]), name
        assert set(df["run_id"]) <= {run_id}, (name, set(df["run_id"]))
    assert describe(snapshot_path(root, "training_set", learner)).run_id == run_id
    if n_rows is not None:
        assert len(first) == n_rows
    return first


def assert_nothing_staged_or_half_written(root):
    assert not list((root / STAGED).rglob("*.parquet")) if (root / STAGED).exists() else True
    assert sorted(p.name for p in (root / "training_set").iterdir()) == sorted(f"{m}.parquet" for m in MODELS)


def test_readers_see_only_the_last_passing_set(played):
    instance, resources, root, learner, first_run = played

    def run(asset, checks=True, **kw):
        return dg.materialize([asset, training_set_checks] if checks else [asset], instance=instance,
                              resources=resources, partition_key=learner, raise_on_error=False, **kw)

    # the learner's first passing set (the fixture's run) is what every reader gets
    rows = assert_published(instance, resources, root, learner, first_run)
    assert len(rows) > 0 and set(rows["run_id"]) == {first_run}
    assert_nothing_staged_or_half_written(root)

    # a set that fails its blocking check: materialized (the failure is in the UI), never readable
    bad = run(rewritten("corrupted"))
    failed = {e.check_name: e for e in bad.get_asset_check_evaluations() if not e.passed}
    assert "no_self_authored_environments" in failed
    assert "not published" in failed["no_self_authored_environments"].metadata["publication"].value
    assert bad.asset_materializations_for_node("training_set")
    after_bad = assert_published(instance, resources, root, learner, first_run, n_rows=len(rows))
    assert after_bad.equals(rows)
    assert_nothing_staged_or_half_written(root)

    # a new passing set replaces it; its rows name the run that produced them
    empty = run(rewritten("empty"))
    assert empty.success and all(e.passed for e in empty.get_asset_check_evaluations())
    assert_published(instance, resources, root, learner, empty.run_id, n_rows=0)

    # a materialization whose checks have not run yet is staged, invisible to every reader
    unchecked = run(training_set, checks=False)
    assert unchecked.success
    assert_published(instance, resources, root, learner, empty.run_id, n_rows=0)
    assert len(list((root / STAGED).rglob("*.parquet"))) == 1
    with duckdb.connect() as conn:  # the documented glob does not reach the staging folder
        assert conn.execute(f"SELECT count(*) FROM '{root}/training_set/*.parquet' WHERE learner = ?",
                            [learner]).fetchone()[0] == 0
    # ... and the checks, run on their own, publish that latest materialization
    checks_only = dg.materialize([training_set, training_set_checks], instance=instance, resources=resources,
                                 tags={"dagster/partition": learner},
                                 selection=dg.AssetSelection.checks_for_assets(training_set))
    assert checks_only.success and all(e.passed for e in checks_only.get_asset_check_evaluations())
    again = assert_published(instance, resources, root, learner, unchecked.run_id, n_rows=len(rows))
    assert list(again["env_id"]) == list(rows["env_id"])
    assert_nothing_staged_or_half_written(root)


def test_consumer_rankings_load_once_its_checks_passed(played):
    instance, resources, root, _, _ = played
    result = dg.materialize([build_dbt_marts(), rankings, make_result_checks("rankings")], instance=instance,
                            resources=resources,
                            run_config={"ops": {"rankings": {"config": {"n_boot": 50, "n_perm": 200}}}})
    assert result.success
    evaluations = result.get_asset_check_evaluations()
    assert evaluations and all(e.passed for e in evaluations)
    other_location = dg.Definitions(assets=[consumer.RANKINGS], resources=consumer.resources())
    table = other_location.load_asset_value("rankings", instance=instance)
    assert sorted(table["model"]) == sorted(MODELS)
    assert set(table["run_id"]) == {result.run_id}
    assert {"solver_rank", "author_rank", "data_version"} <= set(table.columns)
