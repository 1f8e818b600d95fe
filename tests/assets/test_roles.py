"""Roles through Dagster (issue 30): only author-role models author, only author x solver-role pairs are played,
only learners get training sets and author values; the request sensor adds a learner's column and nothing else;
a registry with no solver or no author is refused before anything is written.

The sensor tests tick the real sensor on an ephemeral instance (runs recorded as finished, as the daemon's would
be); the pipeline test materializes the real assets in-process on the simulated models, kept small. The running
daemon adding a learner: tests/flows/test_live_flows.py::test_a_learner_added_to_the_running_daemon_plays_only_its_column."""

from __future__ import annotations

import dagster as dg
import duckdb
import pytest

from envduels_dagster.assets.registry.partitions import MODELS_PARTITION, SOLVERS_PARTITION
from envduels_dagster.core.requests.roster import RosterError
from envduels_dagster.core.requests.stages import RequestBook
from envduels_dagster.demo import materialize_all
from tests.assets.test_incremental import finish, keys_of, quiet_resources, tick  # noqa: F401 - fixture
from tests.helpers.pipeline import pipeline_resources


def write_roles(path, entries: dict[str, str | None]):
    """A registry of simulated models; ``entries`` maps a profile name to its roles (None: both, the default)."""
    lines = ["models:"]
    for name, roles in entries.items():
        lines += [f"  - name: {name}", f"    model: envduels-sim/{name}"] + ([f"    roles: {roles}"] if roles else [])
    path.write_text("\n".join(lines) + "\n")
    return path


THREE_AUTHORS_ONE_LEARNER = {"oracle": "[author]", "expert": "[author]", "journeyman": "[author]",
                             "novice": "[solver]"}


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


@pytest.mark.slow  # the real pipeline, dbt marts included, 2 authors x 1 learner, round 0: 133 s at load 18 (3 Dec)
def test_two_authors_and_a_learner_play_only_their_pairs_through_the_real_pipeline(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVDUELS_ROUNDS", "0")  # round 0 only: the roles are the same in every round
    registry = write_roles(tmp_path / "models.yaml", {"oracle": "[author]", "apprentice": "[author]",
                                                      "novice": "[solver]"})
    resources = pipeline_resources(tmp_path, registry, envs_per_author=2, seeds=(0, 1))
    instance = dg.DagsterInstance.ephemeral()
    counts = materialize_all(instance, resources, log=lambda _m: None)
    assert counts.pop("request").startswith("demo-")  # the runs' envduels/request tag
    assert counts == {"models": 3, "pairs": 2, "authors": 2, "solvers": 1}

    def materialized(name):
        return sorted(instance.get_materialized_partitions(dg.AssetKey(name)))

    assert materialized("authored_environments") == ["apprentice", "oracle"]
    assert materialized("duel_episodes") == ["apprentice|novice", "oracle|novice"]
    assert materialized("training_set") == materialized("author_value") == ["novice"]
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as conn:
        assert conn.execute("SELECT DISTINCT author FROM environments ORDER BY 1").fetchall() == [("apprentice",),
                                                                                                  ("oracle",)]
        assert conn.execute("SELECT DISTINCT solver FROM episodes").fetchall() == [("novice",)]
        assert conn.execute("SELECT DISTINCT learner, author FROM author_value ORDER BY 2").fetchall() == [
            ("novice", "apprentice"), ("novice", "oracle")]
    (rankings,) = [e for e in instance.fetch_materializations(dg.AssetKey("rankings"), limit=1).records]
    metadata = rankings.asset_materialization.metadata
    assert metadata["scope_duels"].value == metadata["scope_role_separation"].value == "not meaningful"
    assert metadata["scope_author_ranking"].value == "meaningful"
    assert "0 model(s) with both roles (none)" in metadata["meaningful_rankings"].value
