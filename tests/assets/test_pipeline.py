"""The whole Dagster graph on 3 simulated models, in an ephemeral instance with a temporary warehouse."""

from __future__ import annotations

import dagster as dg
import duckdb
import pytest

from envduels_dagster.assets.registry.partitions import MODELS_PARTITION, pair_key
from envduels_dagster.cli.demo import materialize_all
from tests.helpers.pipeline import pipeline_resources, write_registry

pytestmark = pytest.mark.slow  # real pipeline runs: outside the `-m 'not slow'` loop

MODELS = ["oracle", "journeyman", "novice"]


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipeline")
    registry = write_registry(tmp / "models.yaml", MODELS)
    from envduels_dagster.resources import AuthorValueSettings

    resources = pipeline_resources(tmp, registry, envs_per_author=3, seeds=(0, 1, 2))
    resources["value_settings"] = AuthorValueSettings(min_envs=2, n_boot=300)  # 3 slots per author: ranked
    instance = dg.DagsterInstance.ephemeral()
    materialize_all(instance, resources, log=lambda _m: None)
    return instance, resources, tmp / "warehouse.duckdb"


def query(db, sql, params=()):
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(sql, params).fetchall()


def test_every_partition_materialized(pipeline):
    instance, _, _ = pipeline
    assert sorted(instance.get_dynamic_partitions(MODELS_PARTITION)) == sorted(MODELS)
    pairs = instance.get_materialized_partitions(dg.AssetKey("duel_episodes"))
    assert len(pairs) == len(MODELS) ** 2
    for key in ("authored_environments", "training_set"):
        assert instance.get_materialized_partitions(dg.AssetKey(key)) == set(MODELS)


def test_every_valid_environment_seed_has_both_conditions(pipeline):
    _, _, db = pipeline
    expected = query(db, """
        SELECT count(*) FROM environments e, unnest(e.benchmark_seeds) AS s(seed), (SELECT unnest(?) AS solver) m
        WHERE e.valid""", (MODELS,))[0][0]
    rows = query(db, """
        SELECT env_id, solver, seed, list_sort(list(condition)) AS conds FROM episodes
        GROUP BY ALL""")
    assert len(rows) == expected > 0
    assert all(conds == ["cold", "hinted"] for *_, conds in rows)


def test_pair_lift_equals_recomputation_from_episodes(pipeline):
    """pair_lift is keyed per round (round 0 and each hardening round): one row per (round, author, solver)."""
    _, _, db = pipeline
    recomputed = {(r, a, s): lift for r, a, s, lift in query(db, """
        WITH seeds AS (
            SELECT round, env_id, author, solver, seed,
                   max(CASE WHEN condition = 'hinted' THEN (status = 'success')::INT END)
                 - max(CASE WHEN condition = 'cold' THEN (status = 'success')::INT END) AS d
            FROM episodes WHERE status <> 'incomplete' GROUP BY ALL
            HAVING count(DISTINCT condition) = 2),
        envs AS (SELECT round, author, solver, env_id, avg(d) AS lift FROM seeds GROUP BY ALL)
        SELECT round, author, solver, avg(lift) FROM envs GROUP BY ALL""")}
    stored = query(db, "SELECT round, author, solver, lift, lift_ci_lower, lift_ci_upper, is_self_pair, lift_ci_reason "
                       "FROM pair_lift")
    rounds = {r for r, *_ in stored}
    assert 0 in rounds and len(stored) == len(recomputed) == len(MODELS) ** 2 * len(rounds)
    for round_, author, solver, lift, lo, hi, is_self, reason in stored:
        assert lift == pytest.approx(recomputed[(round_, author, solver)])
        if reason is None:  # the published interval, or NULL with its reason
            assert lo <= lift <= hi
        else:
            assert reason.startswith("insufficient data") and lo is None and hi is None
        assert is_self == (author == solver)


def data_version(instance, key: dg.AssetKey, partition: str) -> str:
    """The data version Dagster recorded for the latest materialization of ``key`` [partition]."""
    records = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition]),
                                              limit=1).records
    return records[0].asset_materialization.tags["dagster/data_version"]


def test_rematerializing_a_pair_replaces_its_rows(pipeline):
    instance, resources, db = pipeline
    from envduels_dagster.assets.duels.assets import duel_episodes

    sql = "SELECT count(*), count(DISTINCT (env_id, condition, seed)) FROM episodes WHERE author=? AND solver=?"
    key = pair_key("novice", "oracle")
    before_total = query(db, "SELECT count(*) FROM episodes")[0][0]
    before = query(db, sql, ("novice", "oracle"))[0]
    versions = []
    for _ in range(2):
        result = dg.materialize([duel_episodes], instance=instance, resources=resources,
                                partition_key=pair_key("novice", "oracle"))
        assert result.success
        after = query(db, sql, ("novice", "oracle"))[0]
        assert after == before and after[0] == after[1] > 0  # same rows, no duplicates
        assert query(db, "SELECT count(*) FROM episodes")[0][0] == before_total
        versions.append(data_version(instance, duel_episodes.key, key))
    # replayed from the call cache: the same content, so the same data version (nothing downstream is stale).
    # The demo played the pair in a ranged run, which Dagster gives the batch's version: the first replay of
    # the pair alone records its own, and every replay after keeps it.
    assert versions[0] == versions[1]


def test_rejected_environments_have_reasons_and_no_episodes(pipeline):
    _, _, db = pipeline
    assert query(db, "SELECT count(*) FROM environments WHERE NOT valid AND coalesce(reject_reason, '') = ''")[0][0] == 0
    assert query(db, """SELECT count(*) FROM episodes p JOIN environments e USING (env_id)
                        WHERE NOT e.valid""")[0][0] == 0
    assert query(db, "SELECT count(*) FROM environments WHERE valid")[0][0] > 0


def test_self_pairs_are_played_and_flagged(pipeline):
    _, _, db = pipeline
    rows = query(db, "SELECT author = solver, bool_and(is_self_pair = (author = solver)), count(*) FROM episodes GROUP BY 1")
    flags = {same: (ok, n) for same, ok, n in rows}
    assert flags[True][0] and flags[False][0] and flags[True][1] > 0


def test_training_set_rows_meet_the_default_filter(pipeline):
    _, _, db = pipeline
    rows = query(db, "SELECT learner, author, p_cold, p_hint FROM training_set")
    for learner, author, p_cold, p_hint in rows:
        assert author != learner and p_cold == 0.0 and p_hint >= 0.5


def test_malformed_registry_fails_before_any_run_and_leaves_warehouse_untouched(tmp_path):
    registry = write_registry(tmp_path / "models.yaml", ["oracle"], extra="  - name: broken\n    version: 2\n")
    resources = pipeline_resources(tmp_path, registry)
    instance = dg.DagsterInstance.ephemeral()
    with pytest.raises(Exception) as err:
        materialize_all(instance, resources, log=lambda _m: None)
    message = str(err.value)
    assert str(registry) in message and "'broken'" in message and "field 'model'" in message
    assert not (tmp_path / "warehouse.duckdb").exists()
    assert instance.get_runs() == []
    assert instance.get_dynamic_partitions(MODELS_PARTITION) == []


def test_loading_definitions_imports_no_heavy_libraries():
    import subprocess
    import sys

    code = ("import sys, envduels_dagster.definitions as d; "
            "print(','.join(m for m in ('litellm', 'great_expectations', 'dbt.cli') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_training_exports_and_lift_learning_study_are_published(pipeline):
    _, _, db = pipeline
    import os

    from envduels_dagster.api import latest_export_dir, load_training_set

    home = os.environ["ENVDUELS_HOME"]
    for (learner, n) in query(db, "SELECT learner, count(*) FROM training_set GROUP BY 1"):
        df = load_training_set(learner, home=home)
        assert df["env_id"].nunique() == n and latest_export_dir(learner, home=home).is_dir()
    rows = query(db, "SELECT learner, author, gain FROM lift_learning")
    assert {(lr, a) for lr, a, _ in rows} == {(lr, a) for lr in MODELS for a in MODELS if lr != a}
    assert all(-1 <= g <= 1 for *_, g in rows)


def table_assets(defs) -> list[dg.AssetKey]:
    """Every asset of the code location that writes a warehouse table (kind ``duckdb``): a new one joins."""
    graph = defs.resolve_asset_graph()
    return sorted((k for k in graph.get_all_asset_keys() if graph.get(k).is_materializable
                   and "duckdb" in graph.get(k).kinds), key=lambda k: k.to_user_string())


def test_every_table_asset_reports_dagster_standard_table_metadata(pipeline):
    """Each table asset's latest materialization (per partition) names its table, gives its columns, and
    counts its rows; per table, those counts add up to the rows the warehouse holds."""
    from envduels_dagster.assets.shared import TABLE_METADATA_KEYS
    from envduels_dagster.definitions import build_definitions

    instance, _, db = pipeline
    keys = table_assets(build_definitions())
    assert {"model_registry", "duel_episodes", "pair_lift", "training_set", "rankings"} <= {k.path[-1] for k in keys}
    rows_by_table: dict[str, int] = {}
    for key in keys:
        latest: dict[str | None, dict] = {}  # partition -> metadata of its newest materialization
        for record in instance.fetch_materializations(key, limit=10_000).records:  # newest first
            latest.setdefault(record.partition_key, record.asset_materialization.metadata)
        assert latest, f"{key.to_user_string()} was never materialized"
        for partition, md in latest.items():
            missing = [k for k in TABLE_METADATA_KEYS if k not in md]
            assert not missing, f"{key.to_user_string()}[{partition}] lacks {missing}"
            name = md["dagster/table_name"].value
            columns = {c.name for c in md["dagster/column_schema"].schema.columns}
            described = {r[0] for r in query(db, f"DESCRIBE {name}")}
            assert described and described <= columns, (key, name)  # a published snapshot adds provenance
            rows_by_table[name] = rows_by_table.get(name, 0) + md["dagster/row_count"].value
    for name, n in rows_by_table.items():
        assert query(db, f"SELECT count(*) FROM {name}")[0][0] == n, name


def test_lift_learning_checks_read_the_published_figures(pipeline):
    """The lift -> learning figures are metadata, not a table: its result checks read the latest materialization.
    They pass on the clean run; after a trained row is dropped from the table, a check-only run flags the
    published n_pairs as disagreeing with it (and the table is restored)."""
    from envduels_dagster.assets.checking.results import make_result_checks

    instance, resources, _ = pipeline
    evaluations = [r.dagster_event.event_specific_data for run in instance.get_runs()
                   for r in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)]
    clean = {e.check_name: e.passed for e in evaluations if e.asset_key == dg.AssetKey("lift_learning")}
    assert clean == {"no_nan_published": True, "sample_sizes_reported": True}, clean
    checks = make_result_checks("lift_learning")
    job = dg.define_asset_job("lift_learning_checks", selection=dg.AssetSelection.checks(checks))
    defs = dg.Definitions(assets=[], asset_checks=[checks], jobs=[job], resources=resources)
    warehouse = resources["warehouse"]
    with warehouse.get_connection() as conn:
        conn.execute("CREATE TABLE lift_learning_kept AS SELECT * FROM lift_learning")
        dropped = conn.execute("SELECT learner, author FROM lift_learning WHERE n_train_envs > 0 AND lift IS NOT NULL "
                               "AND gain IS NOT NULL LIMIT 1").fetchone()
        assert dropped is not None
        conn.execute("DELETE FROM lift_learning WHERE learner = ? AND author = ?", list(dropped))
    try:
        result = defs.resolve_job_def("lift_learning_checks").execute_in_process(instance=instance,
                                                                                  raise_on_error=False)
        verdicts = {e.check_name: e for e in result.get_asset_check_evaluations()}
        assert not verdicts["sample_sizes_reported"].passed and verdicts["no_nan_published"].passed
        assert "but the table has" in verdicts["sample_sizes_reported"].description
    finally:
        with warehouse.get_connection() as conn:
            conn.execute("DELETE FROM lift_learning")
            conn.execute("INSERT INTO lift_learning SELECT * FROM lift_learning_kept")
            conn.execute("DROP TABLE lift_learning_kept")


def test_the_pipelines_runs_are_the_projects_jobs_tagged_like_the_sensors(pipeline):
    """Not anonymous __ephemeral_asset_job__ runs: each stage runs the job envduels_requests launches for it, with
    the request, stage and (for runs that call a model) provider tags the README promises."""
    from envduels_dagster.assets.registry.requests import REQUEST_TAG, STAGE_TAG
    from envduels_dagster.instance.run_coordinator import PROVIDER_TAG

    instance, _, _ = pipeline
    runs = [r for r in instance.get_runs() if r.tags.get("envduels/demo")]  # other tests here run by hand
    assert runs and not [r.run_id for r in runs if r.job_name == "__ephemeral_asset_job__"]
    assert {r.job_name for r in runs} >= {"author_job", "pair_job", "downstream_job", "learner_job", "studies_job",
                                          "hardened_r1_job", "pairs_r1_job"}
    assert len({r.tags[REQUEST_TAG] for r in runs}) == 1 and runs[0].tags[REQUEST_TAG].startswith("demo-")
    stages = {r.tags["envduels/demo"]: r.tags[STAGE_TAG] for r in runs}
    assert stages["registry"] == "0" and int(stages["studies"]) == len(stages) - 1
    pair_runs = [r for r in runs if r.job_name == "pair_job"]
    # each round's pairs in ranged runs (issue 35): every model plays, so one run holds the whole 3 x 3 stage
    assert len(pair_runs) == 1
    mats = [e.asset_materialization for r in pair_runs
            for e in instance.all_logs(r.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)]
    assert len({m.partition for m in mats if m.asset_key.path == ["duel_episodes"]}) == len(MODELS) ** 2
    assert all(r.tags[PROVIDER_TAG] == "envduels-sim" for r in pair_runs)  # the solver's provider (registry pool)
    assert not [r for r in runs if r.job_name in ("downstream_job", "studies_job") and PROVIDER_TAG in r.tags]
    for r in runs:  # the assets' checks ran in the same runs, as under the sensor (blocking ones gate publication)
        if r.job_name in ("pair_job", "learner_job", "author_job"):
            assert instance.all_logs(r.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION), r.job_name


def test_the_product_tables_describe_every_column_in_definition_and_materialization(pipeline):
    from envduels_dagster.definitions import build_definitions

    instance, _, _ = pipeline
    graph = build_definitions().resolve_asset_graph()
    for name in ("training_set", "author_value", "rankings"):
        spec_schema = graph.get(dg.AssetKey(name)).metadata["dagster/column_schema"]
        assert all(c.description for c in spec_schema.columns), name
        record = instance.fetch_materializations(dg.AssetKey(name), limit=1).records[0]
        columns = record.asset_materialization.metadata["dagster/column_schema"].schema.columns
        undocumented = [c.name for c in columns if not c.description]
        assert columns and not undocumented, (name, undocumented)


def test_the_experiment_report_answers_with_author_values_top_row(pipeline):
    """The report's answer per learner is the author ranked 1 in table author_value; the heatmap has a cell per
    pair of pair_lift's round 0; every pair has an episode page."""
    import re

    from envduels_dagster.settings.locations import envduels_home

    instance, _, db = pipeline
    html = (envduels_home() / "reports" / "experiment" / "index.html").read_text()
    shown = dict(re.findall(r'<tr class="answer" data-learner="([^"]+)" data-author="([^"]+)">', html))
    top = dict(query(db, "SELECT learner, author FROM author_value WHERE rank = 1"))
    assert shown == top and top  # (min_envs 2 in this fixture: authors are ranked)
    learners = sorted(r[0] for r in query(db, "SELECT DISTINCT learner FROM author_value"))
    assert sorted(re.findall(r'<tr class="answer" data-learner="([^"]+)"', html)) == learners
    cells = set(re.findall(r'<g class="cell(?: self)?" data-author="([^"]+)" data-solver="([^"]+)"', html))
    assert cells == set(query(db, "SELECT author, solver FROM pair_lift WHERE round = 0"))
    pages = set(re.findall(r'<a class="episodes" href="(episodes/[^"#]+)', html))
    assert len(pages) == len(MODELS) ** 2
    assert all((envduels_home() / "reports" / "experiment" / p).is_file() for p in pages)
    md = instance.fetch_materializations(dg.AssetKey("experiment_report"), limit=1).records[0].asset_materialization
    assert md.metadata["report"].value.endswith("reports/experiment/index.html")
    assert {r.data["learner"]: r.data["author"] for r in md.metadata["answers"].records} == {
        learner: top.get(learner) for learner in learners}
    key = dg.AssetCheckKey(dg.AssetKey("experiment_report"), "report_self_contained_and_matches_tables")
    (last,) = instance.event_log_storage.get_asset_check_execution_history(key, limit=1)
    evaluation = last.event.dagster_event.event_specific_data
    assert evaluation.passed, evaluation.metadata["problems"].value
