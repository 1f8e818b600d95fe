"""A bad training set is never published: the blocking checks stop training_export and keep `latest`."""


import os

import dagster as dg
import pytest
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.registry.partitions import solver_partitions
from envduels_dagster.assets.training.assets import training_export, training_set
from envduels_dagster.assets.training.checks import training_export_checks, training_set_checks
from envduels_dagster.core.storage.warehouse import read_table, replace_rows
from tests.helpers.pipeline import pipeline_resources, play_round0, write_registry

pytestmark = pytest.mark.slow  # real pipeline runs: outside the `-m 'not slow'` loop

MODELS = ["expert", "novice"]


@pytest.fixture
def published(tmp_path, envduels_home):
    resources = pipeline_resources(tmp_path, write_registry(tmp_path / "models.yaml", MODELS), 2, (0, 1))
    instance = dg.DagsterInstance.ephemeral()
    play_round0(instance, resources, MODELS)
    good = dg.materialize([training_set, training_export, training_set_checks, training_export_checks],
                          instance=instance, resources=resources, partition_key="novice")
    assert good.success and all(e.passed for e in good.get_asset_check_evaluations())
    latest = envduels_home / "exports" / "novice" / "latest"
    return instance, resources, latest, latest.resolve()


def corrupted() -> dg.AssetsDefinition:
    """A ``training_set`` that simulates a buggy filter: the learner's own environment slips in."""
    @dg.asset(name="training_set", partitions_def=solver_partitions)
    def corrupted_training_set(context: dg.AssetExecutionContext, warehouse: DuckDBResource):
        """Simulates a buggy filter: the learner's own environment slips into its training set."""
        with warehouse.get_connection() as conn:
            rows = read_table(conn, "training_set", {"learner": "novice"})
            own = read_table(conn, "environments", {"author": "novice"}).iloc[0]
            bad = rows.iloc[:0].copy()
            bad.loc[0] = {**{c: None for c in rows.columns}, "learner": "novice", "env_id": own["env_id"],
                          "author": "novice", "domain": own["domain"], "class_name": own["class_name"],
                          "max_turns": own["max_turns"], "source_sha256": own["source_sha256"], "hint": own["hint"],
                          "benchmark_seeds": [0, 1], "n_seeds": 2, "p_cold": 0.0, "p_hint": 1.0, "lift": 1.0,
                          "lift_lower": 1.0, "lift_upper": 1.0, "rank": 1}
            replace_rows(conn, "training_set", bad, {"learner": "novice"})

    return corrupted_training_set


def test_self_authored_row_blocks_publication_and_keeps_latest(published):
    instance, resources, latest, first_version = published

    corrupted_training_set = corrupted()
    result = dg.materialize([corrupted_training_set, training_export, training_set_checks, training_export_checks],
                            instance=instance, resources=resources, partition_key="novice", raise_on_error=False)
    failed = {e.check_name: e for e in result.get_asset_check_evaluations() if not e.passed}
    assert "no_self_authored_environments" in failed
    assert not result.asset_materializations_for_node("training_export")  # the publish step never ran
    assert latest.resolve() == first_version and sorted(p.name for p in latest.parent.iterdir()
                                                         if not p.name.startswith(".")) == [first_version.name,
                                                                                             "latest"]


def test_tampered_export_fails_the_export_checks(published):
    instance, resources, latest, _ = published
    (latest / "train.jsonl").write_text("tampered\n")
    result = dg.materialize([training_export, training_export_checks], instance=instance, resources=resources,
                            tags={"dagster/partition": "novice"}, raise_on_error=False,
                            selection=dg.AssetSelection.checks_for_assets(training_export))
    failed = {e.check_name: e for e in result.get_asset_check_evaluations() if not e.passed}
    assert "files_match_hashes" in failed
    assert "train.jsonl does not match its sha256" in failed["files_match_hashes"].metadata["error"].value
    assert os.path.islink(latest)


def test_automation_never_exports_a_training_set_whose_blocking_check_failed(published):
    """Through Dagster's own automation evaluation: the export's condition waits for passing blocking checks
    and for new content (an unchanged set keeps its data version)."""
    instance, resources, latest, first_version = published
    defs = dg.Definitions(assets=[training_set, training_export], asset_checks=[training_set_checks],
                          resources=resources)
    first = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    assert first.total_requested == 0  # the export is current

    # the published (passing) set re-materialized by hand, unchanged: same data version, nothing requested
    assert dg.materialize([training_set, training_set_checks], instance=instance, resources=resources,
                          partition_key="novice").success
    same = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor)
    assert same.get_requested_partitions(training_export.key) == set()

    # a training set whose blocking check fails, materialized by hand: nothing is requested, now or later
    checked = dg.materialize([corrupted(), training_set_checks], instance=instance, resources=resources,
                             partition_key="novice", raise_on_error=False)
    assert "no_self_authored_environments" in {e.check_name for e in checked.get_asset_check_evaluations()
                                                if not e.passed}
    bad = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=same.cursor)
    assert bad.get_requested_partitions(training_export.key) == set()
    again = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=bad.cursor)
    assert again.get_requested_partitions(training_export.key) == set()
    assert latest.resolve() == first_version

    # a passing set again (new content after the failed one): the export is requested
    assert dg.materialize([training_set, training_set_checks], instance=instance, resources=resources,
                          partition_key="novice").success
    ok = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=again.cursor)
    assert ok.get_requested_partitions(training_export.key) == {"novice"}
