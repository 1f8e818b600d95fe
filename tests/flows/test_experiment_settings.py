"""Issue 41: the experiment's settings are stored with it (``$ENVDUELS_HOME/experiment.json``) and read back by
later commands, the sensor's resources and the registry lookup; a change is priced and asked for, never silent.

The daemon itself is driven in tests/flows/test_live_flows.py (slow): its demo stores its command-line sizes."""

from __future__ import annotations

import json

import pytest

from envduels_dagster.core.storage.experiment_file import ExperimentFileError, ExperimentSettings, read, write
from tests.helpers.cli import home  # noqa: F401 - home is a fixture


def _stored(home, registry="/x/models.yaml", **sizes) -> ExperimentSettings:
    settings = ExperimentSettings(**{"envs_per_author": 4, "seeds": 3, "rounds": 0, **sizes}, registry=registry)
    write(home, settings, "test")
    return settings


def test_stored_settings_read_back_whole(home):
    settings = _stored(home)
    assert read(home) == settings
    assert json.loads((home / "experiment.json").read_text())["written_by"] == "test"
    assert not list(home.glob(".experiment.json.*"))  # the temporary file was renamed into place


@pytest.mark.parametrize(("text", "says"), [
    ("{not json", "not JSON"),
    ('{"envs_per_author": 0, "seeds": 2, "rounds": 0, "registry": "r"}',
     "field envs_per_author: expected an integer from 1 to 1000, got 0"),
    ('{"envs_per_author": 2, "seeds": "8", "rounds": 0, "registry": "r"}',
     "field seeds: expected an integer from 1 to 1000, got '8'"),
    ('{"envs_per_author": 2, "seeds": 2, "rounds": 0}', "field registry: expected the registry file's path"),
])
def test_a_bad_settings_file_is_an_error_naming_the_file_and_field_never_the_defaults(home, text, says):
    from envduels_dagster.resources.duel_settings import settings_from_env

    (home / "experiment.json").write_text(text)
    with pytest.raises(ExperimentFileError) as caught:
        settings_from_env()
    assert str(home / "experiment.json") in str(caught.value) and says in str(caught.value)
    assert "delete it and give the sizes again" in str(caught.value)
    assert (home / "experiment.json").read_text() == text  # left as it was


def test_the_daemon_side_reads_the_stored_sizes_over_the_variables_and_says_which_it_ignores(home, monkeypatch):
    from envduels_dagster.assets.rounds.definitions import configured_rounds
    from envduels_dagster.resources.duel_settings import settings_from_env
    from envduels_dagster.settings.experiment import ignored_variables

    assert settings_from_env().envs_per_author == 10 and configured_rounds() == 1  # nothing stored: defaults
    monkeypatch.setenv("ENVDUELS_SEEDS", "5")
    assert settings_from_env().benchmark_seeds == [0, 1, 2, 3, 4]  # nothing stored: the variable
    _stored(home)
    settings = settings_from_env()
    assert (settings.envs_per_author, settings.benchmark_seeds, configured_rounds()) == (4, [0, 1, 2], 0)
    assert ignored_variables() == ["ENVDUELS_SEEDS=5 (stored: 3)"]


def test_a_command_reads_flags_then_variables_then_stored_then_defaults(home, monkeypatch, tmp_path):
    from envduels_dagster.settings.experiment import requested

    registry = tmp_path / "models.yaml"
    registry.write_text("models: []\n")
    _stored(home, registry=str(registry))
    monkeypatch.setenv("ENVDUELS_SEEDS", "6")
    new, sources = requested({"envs_per_author": 7, "seeds": None, "rounds": None})
    assert (new.envs_per_author, new.seeds, new.rounds, new.registry) == (7, 6, 0, str(registry))
    assert sources["envs_per_author"] == "--envs-per-author" and sources["seeds"] == "ENVDUELS_SEEDS"
    assert sources["rounds"].startswith("stored in ") and sources["registry"] == "stored"


def test_the_registry_defaults_to_the_one_the_experiment_stored(home, monkeypatch, tmp_path):
    from envduels_dagster.settings.locations import registry_file

    _stored(home, registry=str(tmp_path / "mine.yaml"))
    assert registry_file() == tmp_path / "mine.yaml"
    monkeypatch.setenv("ENVDUELS_REGISTRY", str(tmp_path / "other.yaml"))
    assert registry_file() == tmp_path / "other.yaml"  # the variable still names another file


def test_a_demo_that_changes_the_stored_sizes_is_priced_and_refused_without_yes(home, capsys, tmp_path):
    """Not on a terminal (pytest's stdin) and no --yes: exit 2, the change and its price printed, nothing stored,
    nothing run (no Dagster instance, no warehouse)."""
    from envduels_dagster.cli import main

    registry = tmp_path / "models.yaml"
    registry.write_text("models:\n  - {name: oracle, model: envduels-sim/oracle}\n"
                        "  - {name: novice, model: envduels-sim/novice}\n")
    before = _stored(home, registry=str(registry))
    assert main(["demo", "--seeds", "5"]) == 2
    out, err = capsys.readouterr()
    assert "This changes the experiment's stored settings" in out and "seeds 3 -> 5" in out
    assert "total " in out  # the plan's total row: what the change costs
    assert err == ("envduels: error: not started: add --yes to change the experiment and run without asking (not on "
                   "a terminal); nothing was run or written\n")
    assert read(home) == before
    assert not (home / "warehouse.duckdb").exists() and not (home / "dagster").exists()


def test_a_paid_run_is_priced_and_refused_off_a_terminal_without_yes(home, capsys, tmp_path):
    from envduels_dagster.cli import main

    registry = tmp_path / "models.yaml"
    registry.write_text("models:\n  - {name: a, model: openai/a, api_base: 'http://127.0.0.1:9/v1', roles: [author], "
                        "input_cost_per_mtok: 1, output_cost_per_mtok: 2}\n"
                        "  - {name: b, model: openai/b, api_base: 'http://127.0.0.1:9/v1', roles: [solver]}\n")
    assert main(["run", "--registry", str(registry), "--envs-per-author", "2", "--seeds", "2", "--rounds", "0"]) == 2
    out, err = capsys.readouterr()
    assert "envduels run: 2 environments per author (--envs-per-author), 2 seeds (--seeds)" in out
    assert "total " in out and "not started: add --yes to start the run" in err
    assert read(home) is None and not (home / "warehouse.duckdb").exists()  # nothing stored, nothing run


def test_a_run_with_a_budget_on_an_unpriced_model_is_refused_before_anything(home, capsys, tmp_path, monkeypatch):
    from envduels_dagster.cli import main

    monkeypatch.setenv("ENVDUELS_BUDGET_USD", "1")  # restored after the test (--budget-usd sets it in-process)

    registry = tmp_path / "models.yaml"
    registry.write_text("models:\n  - {name: a, model: openai/a, api_base: 'http://127.0.0.1:9/v1', roles: [author]}\n"
                        "  - {name: b, model: openai/b, api_base: 'http://127.0.0.1:9/v1', roles: [solver]}\n")
    assert main(["run", "--registry", str(registry), "--budget-usd", "5", "--yes"]) == 2
    err = capsys.readouterr().err
    assert "budget: " in err and "have no price" in err
    assert read(home) is None and not (home / "warehouse.duckdb").exists()


def test_run_help_is_written_for_paid_models_and_demo_help_says_it_is_the_offline_demo(capsys):
    from envduels_dagster.cli import main

    for command in ("run", "demo"):
        with pytest.raises(SystemExit) as done:
            main([command, "--help"])
        assert done.value.code == 0
        text = " ".join(capsys.readouterr().out.split())
        if command == "run":
            assert "Prints the plan (calls, tokens, dollars per model) and asks before it spends" in text
            assert "$ENVDUELS_HOME/experiment.json" in text and "'envduels demo'" in text
            assert all(flag in text for flag in ("--registry", "--envs-per-author", "--seeds", "--rounds",
                                                 "--budget-usd", "--yes", "example:"))
        else:
            assert "the offline demo" in text and "envduels run" in text


def _sensor_tick(instance, tmp_path, written_seeds: list[int] | None = None):
    """One tick of the request sensor on a warehouse whose oracle and novice wrote one environment each, at
    ``written_seeds`` (none when None)."""
    import duckdb
    from dagster_duckdb import DuckDBResource

    from envduels_dagster.core.storage.warehouse import ensure_schema
    from envduels_dagster.resources import DuelSettings
    from tests.helpers.sensor_ticks import tick

    if written_seeds is not None:
        with duckdb.connect(str(tmp_path / "w.duckdb")) as conn:
            ensure_schema(conn)
            for author in ("oracle", "novice"):
                conn.execute("INSERT INTO environments (env_id, author, round, author_version, benchmark_seeds, valid) "
                             "VALUES (?, ?, 0, '1', ?, true)", [f"{author}.r0.0", author, written_seeds])
    return tick(instance, resources={"warehouse": DuckDBResource(database=str(tmp_path / "w.duckdb")),
                                     "settings": DuelSettings()})


def test_the_sensor_names_a_size_variable_it_does_not_apply_and_launches_nothing_for_it(home, monkeypatch, tmp_path):
    import dagster as dg

    from envduels_dagster.assets.registry.partitions import MODELS_PARTITION, SOLVERS_PARTITION
    from tests.helpers.pipeline import write_registry

    registry = write_registry(tmp_path / "models.yaml", ["oracle", "novice"])
    _stored(home, registry=str(registry))
    monkeypatch.setenv("ENVDUELS_SEEDS", "8")
    instance = dg.DagsterInstance.ephemeral()
    for dim in (MODELS_PARTITION, SOLVERS_PARTITION):  # an experiment that already ran: no newcomer
        instance.add_dynamic_partitions(dim, ["oracle", "novice"])
    runs, _, skip = _sensor_tick(instance, tmp_path, written_seeds=[0, 1, 2])
    assert runs == []  # nothing written at 3 seeds is stale for the stored settings, whatever the variable says
    assert "not applied" in skip.skip_message and "ENVDUELS_SEEDS=8 (stored: 3)" in skip.skip_message


def test_the_sensor_reruns_authors_whose_seeds_differ_from_the_stored_ones(home, tmp_path):
    """The other side of the same check: the stored settings changed (a run stored 3 seeds and was cut short),
    so what was written at 2 seeds is stale and the authors are re-run."""
    import dagster as dg

    from envduels_dagster.assets.registry.partitions import MODELS_PARTITION, SOLVERS_PARTITION
    from tests.helpers.pipeline import write_registry

    registry = write_registry(tmp_path / "models.yaml", ["oracle", "novice"])
    _stored(home, registry=str(registry))
    instance = dg.DagsterInstance.ephemeral()
    for dim in (MODELS_PARTITION, SOLVERS_PARTITION):
        instance.add_dynamic_partitions(dim, ["oracle", "novice"])
    runs, _, _ = _sensor_tick(instance, tmp_path, written_seeds=[0, 1])
    assert sorted(r.partition_key for r in runs if r.job_name == "author_job") == ["novice", "oracle"]


def test_the_sensor_launches_nothing_on_an_unusable_settings_file_and_says_why(home, tmp_path):
    import dagster as dg

    from envduels_dagster.assets.registry.partitions import MODELS_PARTITION

    (home / "experiment.json").write_text("{}")
    instance = dg.DagsterInstance.ephemeral()
    runs, _, skip = _sensor_tick(instance, tmp_path)
    assert runs == [] and instance.get_dynamic_partitions(MODELS_PARTITION) == []
    assert str(home / "experiment.json") in skip.skip_message and "field envs_per_author" in skip.skip_message


@pytest.mark.slow  # two in-process runs of the whole pipeline on two simulated models (1-3 min on 2 shared cores)
def test_run_experiment_reports_each_stage_against_the_plan_and_a_larger_wave_pays_only_what_is_new(home, monkeypatch,
                                                                                                    tmp_path):
    """The function under ``envduels run`` (and ``run --until-decided``'s waves): it stores the settings, runs every
    stage, and returns what each stage used and paid; run again, it pays nothing (the call cache). A wave with more
    environments per author stores the new size and pays only for what is new: a slot's authoring prompt does not
    name the number of environments (prompt version 3), so the first wave's calls come from the call cache."""
    import duckdb

    from envduels_dagster.cli.experiment_change import plan_for
    from envduels_dagster.cli.run import run_experiment
    from envduels_dagster.settings.experiment import requested, with_envs

    registry = tmp_path / "models.yaml"
    registry.write_text("models:\n" + "".join(
        f"  - {{name: {n}, model: envduels-sim/{n}, input_cost_per_mtok: 1, output_cost_per_mtok: 2}}\n"
        for n in ("oracle", "novice")))
    monkeypatch.setenv("ENVDUELS_REGISTRY", str(registry))
    monkeypatch.setenv("ENVDUELS_BUDGET_USD", "100")  # a cap: the ledger counts what is paid
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    from envduels_dagster.definitions import build_definitions

    build_definitions.cache_clear()  # built by another test with other rounds: the stored rounds decide here
    first, _ = requested({"envs_per_author": 1, "seeds": 1, "rounds": 0})
    _, plan = plan_for(first)
    lines: list[str] = []
    one = run_experiment(first, plan, log=lines.append, learners=False)
    assert read(home) == first
    labels = [s.label for s in one.stages]
    assert labels[0] == "model_registry" and labels[-1] == "marts and rankings"
    assert "round 0 authoring [oracle]" in labels and any(x.startswith("round 0 pairs") for x in labels)
    calls = [s.calls for s in one.stages]
    assert calls == sorted(calls) and calls[-1] > 0  # used so far only grows
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as conn:
        used = conn.execute("SELECT (SELECT sum(author_calls) FROM environments) + "
                            "(SELECT sum(model_calls) FROM episodes)").fetchone()[0]
    assert one.calls == used and one.planned_calls == plan.total().calls and one.stopped_at_budget == 0
    assert 0 < one.stages[-1].paid_calls <= used and one.paid_usd > 0
    assert sum("[spent] after" in line and "of planned" in line for line in lines) == len(labels)
    # the same settings again: every call comes from the call cache, nothing is paid
    again = run_experiment(first, log=lines.append, learners=False)
    assert again.calls == one.calls and again.stages[-1].paid_calls == 0 and again.paid_usd == 0
    # a larger wave stores its size and pays only for its new slots and their play (the rest: the call cache)
    two = run_experiment(with_envs(first, 2), log=lines.append, learners=False)
    assert read(home).envs_per_author == 2 and two.calls > one.calls
    assert two.stages[-1].paid_calls == two.calls - one.calls
    build_definitions.cache_clear()
