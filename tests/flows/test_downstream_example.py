"""examples/downstream, a second code location, consumes the training set on the producer's instance.

Shown on one instance and one ENVDUELS_HOME, with the producer's real assets and checks: the downstream
asset loads the published rows; declarative automation requests it once per new training set that
passed its blocking checks, never for one that failed them, never for an unchanged one.
"""


import importlib.util
import json

import dagster as dg
import pytest

from envduels_dagster.assets.training.assets import training_set
from envduels_dagster.assets.training.checks import training_set_checks
from tests.helpers.downstream import corrupted_training_set
from tests.helpers.paths import REPO
from tests.helpers.pipeline import pipeline_resources, play_round0, write_registry

MODELS = ["oracle", "expert", "novice"]


def load_example():
    spec = importlib.util.spec_from_file_location("downstream_example", REPO / "examples/downstream/definitions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def producer(tmp_path_factory):
    """The producer's pairs played for real (simulated models, sandboxed play) on a persistent instance."""
    import os

    tmp = tmp_path_factory.mktemp("downstream")
    home = tmp / "home"
    old = os.environ.get("ENVDUELS_HOME")
    os.environ["ENVDUELS_HOME"] = str(home)
    # Two seeds: the probability admission rarely reaches its threshold on so little evidence, and this
    # test is about publication, not admission, so it admits by the fixed rule.
    resources = pipeline_resources(tmp, write_registry(tmp / "models.yaml", MODELS), 3, (0, 1),
                                   training_admission="rule")
    (tmp / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp / "dagster")) as instance:
        play_round0(instance, resources, MODELS)
        yield instance, resources, home
    if old is None:
        os.environ.pop("ENVDUELS_HOME", None)
    else:
        os.environ["ENVDUELS_HOME"] = old


def requested(defs, instance, cursor):
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
    return set(result.get_requested_partitions(dg.AssetKey("trainer_ready_set"))), result.cursor


@pytest.mark.slow
def test_downstream_fires_once_per_new_passing_set_never_on_failed_or_unchanged(producer):
    instance, resources, home = producer
    example = load_example()
    downstream = example.defs
    # Both locations' definitions over the one instance: the producer's training set with its blocking
    # checks (what the workspace's asset graph holds), the consumer's asset reading it by key.
    workspace = dg.Definitions(assets=[training_set, example.trainer_ready_set], asset_checks=[training_set_checks],
                               resources=resources)

    def produce(asset, learner):
        return dg.materialize([asset, training_set_checks], instance=instance, resources=resources,
                              partition_key=learner, raise_on_error=False)

    def consume(learner):
        result = dg.materialize([example.trainer_ready_set, *downstream.assets[:1]], instance=instance,
                                resources=downstream.resources, partition_key=learner,
                                selection=[example.trainer_ready_set])
        assert result.success
        return result

    fired, cursor = requested(workspace, instance, None)  # the automation sensor ticks before any set exists
    assert fired == set()
    for learner in MODELS:
        assert produce(training_set, learner).success
    sizes = {m: len(downstream.load_asset_value("training_set", partition_key=m, instance=instance)) for m in MODELS}
    learner = max(sizes, key=sizes.get)
    assert sizes[learner] > 0, sizes

    fired, cursor = requested(workspace, instance, cursor)
    assert learner in fired  # a first passing set
    for m in fired:
        consume(m)
    out = [json.loads(line) for line in (home / "downstream" / learner / "trainer_ready.jsonl").read_text().splitlines()]
    rows = downstream.load_asset_value("training_set", partition_key=learner, instance=instance)
    assert {r["env_id"] for r in out} == set(rows.loc[rows["lift"] >= 0.5, "env_id"])
    assert {r["source_data_version"] for r in out} <= set(rows["data_version"])
    fired, cursor = requested(workspace, instance, cursor)
    assert fired == set()  # once

    assert produce(training_set, learner).success  # unchanged content, same data version
    fired, cursor = requested(workspace, instance, cursor)
    assert fired == set()

    bad = produce(corrupted_training_set, learner)  # new content that fails its blocking checks
    assert not all(e.passed for e in bad.get_asset_check_evaluations())
    for _ in range(2):
        fired, cursor = requested(workspace, instance, cursor)
        assert fired == set()

    assert produce(training_set, learner).success  # a new passing set (the good rows again)
    fired, cursor = requested(workspace, instance, cursor)
    assert fired == {learner}
    consume(learner)
    fired, cursor = requested(workspace, instance, cursor)
    assert fired == set()
