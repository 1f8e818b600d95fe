"""``envduels import`` goes through Dagster: an import is author partition ``import:<name>`` of
``authored_environments``, materialized by a real run on the project's instance, then played by the
registry's models like any author's environments (real DuckDB, real Dagster runs, no mocks)."""

from __future__ import annotations

import contextlib
import io
import json

import dagster as dg
import duckdb
import pytest

from envduels_dagster import cli
from envduels_dagster.assets.registry.partitions import MODELS_PARTITION, SOLVERS_PARTITION, pair_key
from envduels_dagster.core.authoring.imports import ImportInputError, import_partition, namespaced
from envduels_dagster.core.protocol import MAX_SEED, EnvironmentSpec
from envduels_dagster.core.requests.stages import plan_import, plan_new_models
from tests.helpers.exports import SOURCE, write_export_dir
from tests.helpers.pipeline import write_registry
from tests.helpers.sensor_ticks import keys_of, tick

SEEDS = [0, 4191792089, MAX_SEED]


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.slow  # a few seconds or more (measured with --durations, loaded 2-core machine)
def test_an_import_is_a_materialization_and_the_models_then_play_it(tmp_path, envduels_home, monkeypatch):
    from envduels_dagster.assets.duels.assets import duel_episodes
    from envduels_dagster.definitions import build_resources

    registry = write_registry(tmp_path / "models.yaml", ["novice"])
    monkeypatch.setenv("ENVDUELS_REGISTRY", str(registry))
    monkeypatch.setenv("DAGSTER_HOME", str(envduels_home / "dagster"))  # restored after the test
    root = write_export_dir(tmp_path / "export", SEEDS)

    code, out, err = run_cli("import", str(root), "--json")
    assert code == 0, err
    assert json.loads(out) == {"env_id": "import:ext.echo", "author": "import:ext", "valid": True, "reason": None}
    assert "1 valid, as author import:ext in Dagster run " in err and "(job import_job, DAGSTER_HOME=" in err

    with dg.DagsterInstance.get() as instance:
        # The import is a materialization of authored_environments[import:ext], by an import_job run.
        (record,) = instance.fetch_materializations(dg.AssetRecordsFilter(
            asset_key=dg.AssetKey("authored_environments"), asset_partitions=["import:ext"]), limit=5).records
        metadata = record.asset_materialization.metadata
        assert metadata["num_rows"].value == 1 and metadata["valid"].value == 1
        assert metadata["dagster/row_count"].value == 1  # Dagster's table metadata, as authored partitions give
        assert instance.get_run_by_id(record.run_id).job_name == "import_job"
        # An author, never a solver: it has no model.
        assert "import:ext" in instance.get_dynamic_partitions(MODELS_PARTITION)
        assert "import:ext" not in instance.get_dynamic_partitions(SOLVERS_PARTITION)

        # The request sensor plans the import's pairs with every registry model (and only those).
        sensor_resources = {"warehouse": dg.ResourceDefinition.none_resource(), "settings": build_resources()["settings"]}
        runs, cursor, _ = tick(instance, resources=sensor_resources)  # novice is new: its own request first
        runs, cursor, _ = tick(instance, cursor, sensor_resources)
        pairs = keys_of(runs, "pair_job")
        assert "import:ext|novice" in pairs and not any(p.endswith("|import:ext") for p in pairs)

        # A solver plays the imported environment: one pair, materialized for real.
        result = dg.materialize([duel_episodes], instance=instance, resources=build_resources(),
                                partition_key=pair_key("import:ext", "novice"))
        assert result.success
    with duckdb.connect(str(envduels_home / "warehouse.duckdb"), read_only=True) as conn:
        played = conn.execute("SELECT condition, seed FROM episodes WHERE author = 'import:ext' "
                              "AND solver = 'novice' ORDER BY condition, seed").fetchall()
        (version,) = conn.execute("SELECT DISTINCT author_version FROM environments "
                                  "WHERE author = 'import:ext'").fetchone()
    assert played == [(c, s) for c in ("cold", "hinted") for s in SEEDS]
    assert version == metadata["author_version"].value

    # Importing again under another name keeps both, each under its own partition and ids.
    code, out, err = run_cli("import", str(root), "--author", "bench", "--json")
    assert code == 0, err
    assert json.loads(out)["env_id"] == "import:bench.echo"


def test_a_bad_import_name_or_clashing_ids_are_refused_before_anything_is_written(tmp_path, envduels_home):
    root = write_export_dir(tmp_path / "export", [0, 1])
    code, out, err = run_cli("import", str(root), "--author", "has space")
    assert code == 2 and out == ""
    assert err.splitlines() == [f"envduels: error: {root}: cannot import: import name 'has space' must match "
                                "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$ (letters, digits, '_.-'); give one with --author NAME"]
    assert not (envduels_home / "warehouse.duckdb").exists() and not (envduels_home / "imports").exists()
    twins = [EnvironmentSpec(env_id=i, author="x", class_name="Echo", max_turns=2, source=SOURCE) for i in ("a/b", "a:b")]
    with pytest.raises(ImportInputError, match="'a/b' and 'a:b' both import as 'import:x.a_b'"):
        namespaced(twins, import_partition("x"))


# Issue 33, item 2: an import listing benchmark_seeds [0, 0, 0, 1] succeeded and stored 3 episodes per (seed 0,
# condition), which fed the marts; 100,000 seeds made validate and import run without end.
@pytest.mark.parametrize(("seeds", "problem"), [
    ([0, 0, 0, 1], "benchmark seed 0 is listed twice (positions 0 and 1): seeds are a set, list each once"),
    (list(range(100_000)), "100000 benchmark seeds: at most 1000 are allowed"),
], ids=["duplicates", "100000"])
def test_duplicate_or_too_many_seeds_are_refused_at_validate_and_import_and_nothing_is_written(
        tmp_path, envduels_home, monkeypatch, seeds, problem):
    import time

    monkeypatch.setenv("DAGSTER_HOME", str(envduels_home / "dagster"))
    root = write_export_dir(tmp_path / "export", seeds)
    t0 = time.monotonic()
    code, out, err = run_cli("import", str(root))
    assert code == 2 and out == ""
    assert err.splitlines() == [f"envduels: error: {root}: bad export: environment 'echo': e/meta.json: {problem}; "
                                "fix the export and run again"]
    code, out, err = run_cli("validate", str(root))
    assert code == 1 and out.splitlines() == [f"{root}: REJECTED: environment 'echo': e/meta.json: {problem}"]
    assert time.monotonic() - t0 < 10  # refused before any seed is played
    assert not envduels_home.exists() or not any(envduels_home.iterdir())  # no warehouse, instance or staged copy


def test_duplicate_seeds_on_the_command_line_and_an_empty_export_are_refused(tmp_path, envduels_home):
    env = tmp_path / "echo.py"
    env.write_text(SOURCE)
    code, out, err = run_cli("validate", str(env), "--seed", "3", "--seed", "3")
    assert code == 2 and out == ""
    assert err.splitlines() == ["envduels: error: --seed: benchmark seed 3 is listed twice (positions 0 and 1): "
                                "seeds are a set, list each once"]
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "manifest.json").write_text(json.dumps({"format_version": 1, "environments": []}))
    code, out, err = run_cli("validate", str(empty))
    assert code == 1 and out.splitlines() == [f"{empty}: REJECTED: the export lists no environments"]
    code, out, err = run_cli("import", str(empty))
    assert code == 2 and err.splitlines() == [f"envduels: error: {empty}: cannot import: the export lists no "
                                              "environments; nothing to import"]
    assert ".tmp-" not in err
    assert not envduels_home.exists() or not any(envduels_home.iterdir())


def test_an_environment_spec_refuses_duplicate_or_too_many_seeds_wherever_it_is_built():
    with pytest.raises(ValueError, match="benchmark seed 5 is listed twice"):
        EnvironmentSpec(env_id="e", author="a", class_name="Echo", max_turns=2, source=SOURCE, benchmark_seeds=[5, 1, 5])
    with pytest.raises(ValueError, match="1001 benchmark seeds: at most 1000"):
        EnvironmentSpec(env_id="e", author="a", class_name="Echo", max_turns=2, source=SOURCE,
                        benchmark_seeds=list(range(1001)))


def test_imports_take_round_zero_pairs_as_authors_only():
    plan = plan_import("r1", "import:bench", ["oracle", "novice"])
    assert plan.stages[0].kind == "pairs" and plan.stages[0].round == 0
    assert plan.stages[0].partitions == ("import:bench|oracle", "import:bench|novice")
    assert [s.kind for s in plan.stages[1:]] == ["downstream", "learners", "studies"]
    assert plan.stages[2].partitions == ("oracle", "novice")  # learners: models only
    # A model joining later plays every import in round 0, and only there.
    new = plan_new_models("r2", ["apprentice"], ["oracle", "apprentice"], rounds=1, imported=["import:bench"])
    pairs = {s.round: s.partitions for s in new.stages if s.kind == "pairs"}
    assert "import:bench|apprentice" in pairs[0] and not any("import:" in p for p in pairs[1])
    assert not any("import:" in p for s in new.stages if s.kind != "pairs" for p in s.partitions)


def test_a_solver_version_bump_makes_its_import_pairs_stale_in_round_zero_only():
    from envduels_dagster.core.requests.stages import plan_stale
    from envduels_dagster.core.requests.staleness import stale_plan

    versions = {"oracle": "2", "novice": "1"}
    author_state = {"import:bench": ({"abc123"}, {(7, 8)}), "novice": ({"1"}, {(0, 1)})}
    pair_state = {("import:bench", "oracle"): ({"abc123"}, {"1"}), ("import:bench", "novice"): ({"abc123"}, {"1"}),
                  ("novice", "oracle"): ({"1"}, {"1"})}
    authors, pairs = stale_plan(versions, [0, 1], author_state, pair_state)
    assert authors == [] and pairs == [("import:bench", "oracle"), ("novice", "oracle")]
    plan = plan_stale("s", authors, pairs, ["oracle", "novice"], rounds=1)
    by_round = {s.round: s.partitions for s in plan.stages if s.kind == "pairs"}
    assert by_round == {0: ("import:bench|oracle", "novice|oracle"), 1: ("novice|oracle",)}
    only_import = plan_stale("t", [], [("import:bench", "oracle")], ["oracle"], rounds=1)
    assert [(s.kind, s.round) for s in only_import.stages][:1] == [("pairs", 0)]
    assert not any(s.kind == "pairs" and s.round == 1 for s in only_import.stages)


@pytest.mark.slow  # about a second or more (--durations, 1 Dec 2026): kept out of the inner loop
def test_a_failed_import_run_names_the_run_and_the_problem_and_writes_nothing(tmp_path, envduels_home, monkeypatch):
    from envduels_dagster.cli.importing import run_import

    monkeypatch.setenv("DAGSTER_HOME", str(envduels_home / "dagster"))
    run = run_import("import:gone", tmp_path / "no-such-export")  # e.g. a staged copy deleted under the run
    assert not run.success and run.run_id
    assert run.error == f"import 'import:gone': {(tmp_path / 'no-such-export').resolve()}: no manifest.json; nothing was written"
    with dg.DagsterInstance.get() as instance:
        assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE
    warehouse = envduels_home / "warehouse.duckdb"
    if warehouse.exists():
        with duckdb.connect(str(warehouse), read_only=True) as conn:
            tables = {t for (t,) in conn.execute("SHOW TABLES").fetchall()}
            assert "environments" not in tables or conn.execute("SELECT count(*) FROM environments").fetchone() == (0,)


def write_two_author_export(root, authors=("alice", "bob")):
    """An EnvDuels export (directory ``root``) holding one environment by each of ``authors``."""
    from envduels_dagster.core.protocol import sha256_text

    entries = []
    for i, author in enumerate(authors):
        (root / f"e{i}").mkdir(parents=True)
        (root / f"e{i}" / "env.py").write_text(SOURCE)
        (root / f"e{i}" / "meta.json").write_text(json.dumps({"benchmark_seeds": [0, 1]}))
        (root / f"e{i}" / "priv.json").write_text(json.dumps({"environment_id": f"echo{i}", "hints": {"hint": "mod 7"}}))
        entries.append({"id": f"echo{i}", "source": f"e{i}/env.py", "source_sha256": sha256_text(SOURCE),
                        "class_name": "Echo", "max_turns": 2, "domain": "arithmetic", "split": "test", "author": author,
                        "metadata": f"e{i}/meta.json", "privileged": f"e{i}/priv.json"})
    (root / "manifest.json").write_text(json.dumps({"format_version": 1, "environments": entries}))
    return root


def test_a_multi_author_export_makes_one_import_per_original_author(tmp_path):
    from envduels_dagster.core.authoring.imports import import_groups
    from envduels_dagster.core.training.format import load_export

    root = write_two_author_export(tmp_path / "paper", ("alice", "bob/2"))
    specs = load_export(root)
    groups = import_groups(specs, root)
    assert {name: [s.env_id for s in members] for name, members in groups.items()} == {
        "paper.alice": ["echo0"], "paper.bob_2": ["echo1"]}
    assert list(import_groups(specs, root, "bench")) == ["bench"]  # --author still forces one author
    one = write_two_author_export(tmp_path / "solo", ("alice", "alice"))
    assert list(import_groups(load_export(one), one)) == ["alice"]  # one author: named after it, as before


def test_authors_that_import_under_the_same_name_are_refused_before_anything_is_written(tmp_path, envduels_home):
    root = write_two_author_export(tmp_path / "paper", ("bob 2", "bob/2"))
    code, out, err = run_cli("import", str(root))
    assert code == 2 and out == ""
    assert err.splitlines() == [f"envduels: error: {root}: cannot import: authors 'bob 2' and 'bob/2' both import "
                                "as import:paper.bob_2; give them names that differ in letters, digits or '_.-', "
                                "or import everything as one author with --author NAME"]
    assert not (envduels_home / "warehouse.duckdb").exists() and not (envduels_home / "imports").exists()
    assert not (envduels_home / "dagster").exists()


@pytest.mark.slow  # two import runs, two pairs and an author_value run, in-process: ~30 s on 2 shared cores
def test_imported_authors_stay_apart_through_pairs_and_author_value(tmp_path, envduels_home, monkeypatch):
    from envduels_dagster.assets.duels.assets import duel_episodes
    from envduels_dagster.assets.value.assets import author_value
    from envduels_dagster.definitions import build_resources

    registry = tmp_path / "models.yaml"
    registry.write_text("models:\n  - name: novice\n    model: envduels-sim/novice\n    roles: [solver]\n"
                        "  - name: expert\n    model: envduels-sim/expert\n    roles: [author]\n")
    monkeypatch.setenv("ENVDUELS_REGISTRY", str(registry))
    monkeypatch.setenv("DAGSTER_HOME", str(envduels_home / "dagster"))
    root = write_two_author_export(tmp_path / "paper")

    code, out, err = run_cli("import", str(root), "--json")
    assert code == 0, err
    assert [json.loads(line)["author"] for line in out.splitlines()] == ["import:paper.alice", "import:paper.bob"]
    assert [json.loads(line)["env_id"] for line in out.splitlines()] == ["import:paper.alice.echo0",
                                                                         "import:paper.bob.echo1"]
    with dg.DagsterInstance.get() as instance:
        assert instance.get_materialized_partitions(dg.AssetKey("authored_environments")) == {
            "import:paper.alice", "import:paper.bob"}
        assert instance.get_dynamic_partitions(SOLVERS_PARTITION) == []  # imports never solve
        # The sensor: expert authors (its own request), then each import is played by the learner only.
        sensor_resources = {"warehouse": dg.ResourceDefinition.none_resource(), "settings": build_resources()["settings"]}
        runs, cursor, _ = tick(instance, resources=sensor_resources)
        assert keys_of(runs, "author_job") == ["expert"]
        runs, cursor, _ = tick(instance, cursor, sensor_resources)
        assert sorted(keys_of(runs, "pair_job", instance)) == ["import:paper.alice|novice", "import:paper.bob|novice"]
        resources = build_resources()
        for author in ("import:paper.alice", "import:paper.bob"):
            assert dg.materialize([duel_episodes], instance=instance, resources=resources,
                                  partition_key=pair_key(author, "novice")).success
        assert dg.materialize([author_value], instance=instance, resources=resources, partition_key="novice").success
    with duckdb.connect(str(envduels_home / "warehouse.duckdb"), read_only=True) as conn:
        rows = conn.execute("SELECT learner, author, n_envs FROM author_value ORDER BY author").fetchall()
        meta = conn.execute("SELECT author, author_meta FROM environments ORDER BY author").fetchall()
    assert rows == [("novice", "import:paper.alice", 1), ("novice", "import:paper.bob", 1)]
    assert [json.loads(m)["imported_author"] for _, m in meta] == ["alice", "bob"]


# Issue 33, item 8: a 60 MB source validated, a 4 GiB one was read whole, a 20 MB hint was imported. The sizes
# are checked before a file is read (the 4 GiB file here is sparse: reading it would take minutes).
def test_oversized_sources_and_hints_are_refused_before_reading_and_nothing_is_written(tmp_path, envduels_home,
                                                                                         monkeypatch):
    import time

    monkeypatch.setenv("DAGSTER_HOME", str(envduels_home / "dagster"))
    big = tmp_path / "big.py"
    with open(big, "wb") as fh:
        fh.truncate(4 * 1024 ** 3)
    t0 = time.monotonic()
    code, out, err = run_cli("validate", str(big))
    assert code == 2 and out == ""
    assert err.splitlines() == [f"envduels: error: {big} is 4,294,967,296 bytes: at most 1,048,576 are allowed for "
                                "an environment source"]
    small = tmp_path / "echo.py"
    small.write_text(SOURCE)
    code, out, err = run_cli("validate", str(small), "--hint", "h" * (64 * 1024 + 1))
    assert code == 2 and err.splitlines() == ["envduels: error: --hint is 65,537 bytes: at most 65,536 are allowed"]

    root = write_export_dir(tmp_path / "export", [0, 1])
    with open(root / "e" / "env.py", "wb") as fh:
        fh.truncate(4 * 1024 ** 3)
    problem = "environment 'echo': source 'e/env.py' is 4,294,967,296 bytes: at most 1,048,576 are allowed"
    code, out, err = run_cli("import", str(root))
    assert code == 2 and err.splitlines() == [f"envduels: error: {root}: bad export: {problem}; fix the export and "
                                              "run again"]
    code, out, err = run_cli("validate", str(root))
    assert code == 1 and out.splitlines() == [f"{root}: REJECTED: {problem}"]

    hinted = write_export_dir(tmp_path / "hinted", [0, 1])
    (hinted / "e" / "priv.json").write_text(json.dumps({"environment_id": "echo", "hints": {"hint": "h" * 70_000}}))
    code, out, err = run_cli("import", str(hinted))
    assert code == 2 and err.splitlines() == [
        f"envduels: error: {hinted}: bad export: environment 'echo': e/priv.json: the hint is 70,000 bytes: at "
        "most 65,536 are allowed; fix the export and run again"]
    (hinted / "e" / "priv.json").write_text(" " * (1024 * 1024 + 1))
    code, out, err = run_cli("import", str(hinted))
    assert code == 2 and "privileged file 'priv.json' is 1,048,577 bytes: at most 1,048,576 are allowed" in err
    assert time.monotonic() - t0 < 10
    assert not envduels_home.exists() or not any(envduels_home.iterdir())  # no warehouse, instance or staged copy
