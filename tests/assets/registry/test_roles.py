"""Roles through Dagster (issue 30): only author-role models author, only author x solver-role pairs are played,
only learners get training sets and author values; the request sensor adds a learner's column and nothing else;
a registry with no solver or no author is refused before anything is written.

The sensor tests tick the real sensor on an ephemeral instance (runs recorded as finished, as the daemon's would
be). The real pipeline with 2 authors and 1 learner is the README rehearsal
(tests/flows/test_cli.py::test_the_first_real_experiment_of_the_readme_runs_against_serve_sim); the running
daemon adding a learner: tests/flows/test_live_flows.py::test_a_learner_added_to_the_running_daemon_plays_only_its_column."""

from __future__ import annotations

import dagster as dg
import pytest

from envduels_dagster.assets.registry.partitions import MODELS_PARTITION, SOLVERS_PARTITION
from envduels_dagster.cli.demo import materialize_all
from envduels_dagster.core.requests.roster import RosterError
from envduels_dagster.core.requests.stages import RequestBook
from tests.helpers.pipeline import THREE_AUTHORS_ONE_LEARNER, pipeline_resources, write_roles
from tests.helpers.sensor_ticks import (  # noqa: F401 - quiet_resources is a fixture
    finish,
    keys_of,
    quiet_resources,
    tick,
)


def run_request(instance, cursor, resources, first):
    """Finish every stage of the open request(s) as the daemon would; return the runs launched per job."""
    seen: dict[str, list] = {}
    runs = first
    for _ in range(12):
        for r in runs:
            seen.setdefault(r.job_name, []).append(r)
        if not runs:
            break
        finish(instance, runs)
        runs, cursor, _ = tick(instance, cursor, resources)
    return seen, cursor


def test_three_authors_and_a_learner_get_three_pairs_and_a_second_learner_only_its_column(
        tmp_path, monkeypatch, quiet_resources):
    registry = write_roles(tmp_path / "models.yaml", THREE_AUTHORS_ONE_LEARNER)
    monkeypatch.setenv("ENVDUELS_REGISTRY", str(registry))
    instance = dg.DagsterInstance.ephemeral()

    runs, cursor, _ = tick(instance, resources=quiet_resources)
    assert keys_of(runs, "author_job") == ["expert", "journeyman", "oracle"]  # the learner writes nothing
    assert instance.get_dynamic_partitions(MODELS_PARTITION) == ["oracle", "expert", "journeyman"]
    assert instance.get_dynamic_partitions(SOLVERS_PARTITION) == ["novice"]
    seen, cursor = run_request(instance, cursor, quiet_resources, runs)
    pairs = sorted(p for r in seen["pair_job"] for p in keys_of([r], "pair_job", instance))
    assert pairs == ["expert|novice", "journeyman|novice", "oracle|novice"]
    assert [str(r.partition_key) for r in seen["learner_job"]] == ["novice"]  # one training set, one author_value
    assert RequestBook.from_json(cursor).open == {}

    # A second learner plays only its 3 new pairs (round 0 and the configured round 1), authors nothing.
    write_roles(registry, {**THREE_AUTHORS_ONE_LEARNER, "apprentice": "[solver]"})
    runs, cursor, _ = tick(instance, cursor, quiet_resources)
    assert instance.get_dynamic_partitions(SOLVERS_PARTITION) == ["novice", "apprentice"]
    assert instance.get_dynamic_partitions(MODELS_PARTITION) == ["oracle", "expert", "journeyman"]
    seen, cursor = run_request(instance, cursor, quiet_resources, runs)
    assert "author_job" not in seen and "hardened_r1_job" not in seen
    for job in ("pair_job", "pairs_r1_job"):
        assert sorted(p for r in seen[job] for p in keys_of([r], job, instance)) == [
            "expert|apprentice", "journeyman|apprentice", "oracle|apprentice"]
    assert sorted(str(r.partition_key) for r in seen["learner_job"]) == ["apprentice", "novice"]


@pytest.mark.parametrize("entries,why", [
    ({"oracle": "[author]", "expert": "[author]"}, "no model has the solver role"),
    ({"novice": "[solver]"}, "no model has the author role"),
])
def test_the_sensor_refuses_a_registry_without_a_solver_or_an_author_and_registers_nothing(
        tmp_path, monkeypatch, quiet_resources, entries, why):
    monkeypatch.setenv("ENVDUELS_REGISTRY", str(write_roles(tmp_path / "models.yaml", entries)))
    instance = dg.DagsterInstance.ephemeral()
    runs, _, skip = tick(instance, resources=quiet_resources)
    assert runs == [] and "registry is invalid, nothing requested" in skip.skip_message and why in skip.skip_message
    assert instance.get_dynamic_partitions(MODELS_PARTITION) == instance.get_dynamic_partitions(SOLVERS_PARTITION) == []


def test_the_demo_refuses_a_registry_without_a_solver_before_anything_is_written(tmp_path):
    registry = write_roles(tmp_path / "models.yaml", {"oracle": "[author]", "expert": "[author]"})
    instance = dg.DagsterInstance.ephemeral()
    with pytest.raises(RosterError, match=r"models.yaml: field 'roles': no model has the solver role"):
        materialize_all(instance, pipeline_resources(tmp_path, registry), log=lambda _m: None)
    assert instance.get_dynamic_partitions(MODELS_PARTITION) == [] and not instance.get_run_records()
    assert not (tmp_path / "warehouse.duckdb").exists()
