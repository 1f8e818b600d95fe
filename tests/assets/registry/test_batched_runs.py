"""Batched pair runs: a pair stage goes out as few ranged runs, and every pair is still its own partition.

The sensor's run requests are executed as the daemon's run worker would (the same tags, the same
assets and checks), on simulated models: fewer runs than pairs, each pair materialized exactly once
with its own rows and metadata, checks recorded per pair, and one failing pair in a batch costs
neither the other pairs' rows nor their materializations (the run fails; re-executing it replays the
batch without duplicating a row).
"""

from __future__ import annotations

import collections

import dagster as dg
import pytest

from envduels_dagster.assets.registry.partitions import register_models
from envduels_dagster.assets.registry.requests import (
    REQUEST_TAG,
    dimension_orders,
    run_partitions,
    stage_run_requests,
    stage_statuses,
)
from envduels_dagster.core.requests.batching import Batch, pair_batches, pairs_in_range
from envduels_dagster.core.requests.stages import RequestPlan, Stage, StageStatus
from tests.helpers.pipeline import pipeline_resources, write_registry

MODELS = ["oracle", "journeyman", "novice"]
PAIRS = [f"{a}|{s}" for a in MODELS for s in MODELS]


def _cover(batches: list[Batch], authors, solvers) -> list[str]:
    out = []
    for b in batches:
        in_range = pairs_in_range(b.start, b.end, authors, solvers)
        assert in_range == b.pairs  # the run's range is exactly the batch
        out += in_range
    return out


@pytest.mark.parametrize("n, k", [(5, 4), (30, 100), (30, 7), (31, 100)])
def test_batches_cover_the_pairs_exactly_within_the_size_limit(n, k):
    models = [f"m{i:02d}" for i in range(n)]
    full = [f"{a}|{s}" for a in models for s in models]
    batches = pair_batches(full, models, models, k)
    assert sorted(_cover(batches, models, models)) == sorted(full)
    assert all(len(b) <= k for b in batches) and len(batches) >= 2  # two runs at least: two cores
    newcomer = [p for p in full if models[-1] in p.split("|")]
    few = pair_batches(newcomer, models, models, k)
    assert sorted(_cover(few, models, models)) == sorted(newcomer)
    assert len(few) <= max(2, -(-len(newcomer) // k) + 2)  # its row and its column


def test_batches_hold_one_provider_and_skip_unregistered_names():
    models = ["a", "b", "c", "d"]
    pools = {"a": "p", "b": "q", "c": "p", "d": "p"}
    batches = pair_batches([f"{x}|{y}" for x in models for y in models] + ["a|zz"], models, models, 100,
                           group_of=pools)
    for b in batches:
        assert len({pools.get(s) for s in b.solvers}) == 1 and b.group == pools.get(b.solvers[0])
    assert Batch(("a",), ("zz",), None) in batches  # not a partition yet: a run of its own, as before
    assert sorted(_cover([b for b in batches if b.solvers != ("zz",)], models, models)) == sorted(
        f"{x}|{y}" for x in models for y in models)


@pytest.fixture
def pipeline(tmp_path, monkeypatch):
    registry = write_registry(tmp_path / "models.yaml", MODELS)
    monkeypatch.setenv("ENVDUELS_REGISTRY", str(registry))
    from envduels_dagster.definitions import build_definitions

    defs = build_definitions()
    by_name = {k.to_user_string(): a for a in defs.assets for k in a.keys}
    resources = pipeline_resources(tmp_path, registry, envs_per_author=2, seeds=(0, 1))
    instance = dg.DagsterInstance.ephemeral()
    register_models(instance, MODELS)
    checks = [c for c in defs.asset_checks if any(k.asset_key.to_user_string() == "duel_episodes" for k in c.check_keys)]

    def run(asset: str, partition_key=None, tags=None):
        return dg.materialize([by_name[asset], *(checks if asset == "duel_episodes" else [])], instance=instance,
                              resources=resources, partition_key=partition_key, tags=tags, raise_on_error=False)

    return instance, run, resources


def _execute(run, requests):
    return [run("duel_episodes", r.partition_key, {**r.tags}) for r in requests]


def _rows(resources, author=None) -> collections.Counter:
    with resources["warehouse"].get_connection() as conn:
        rows = conn.execute("SELECT author, solver, env_id, seed, condition FROM episodes WHERE round = 0").fetchall()
    assert len(rows) == len(set(rows)), "an episode was written twice"
    return collections.Counter(f"{a}|{s}" for a, s, *_ in rows)


def _materializations(instance) -> collections.Counter:
    records = instance.fetch_materializations(dg.AssetKey("duel_episodes"), limit=1000).records
    return collections.Counter(str(r.partition_key) for r in records)


@pytest.mark.slow  # real play of nine pairs and their checks: ~15 s on 2 loaded cores
def test_a_pair_stage_runs_in_fewer_runs_and_each_pair_is_materialized_once(pipeline):
    instance, run, resources = pipeline
    for author in MODELS:
        assert run("authored_environments", author).success
    plan = RequestPlan("req-1", "test", (Stage("pairs", 0, tuple(PAIRS)),))
    requests = stage_run_requests(plan, 0, dimension_orders(instance), {m: "envduels-sim" for m in MODELS})
    assert 1 < len(requests) < len(PAIRS)
    assert all(r.tags["envduels/provider"] == "envduels-sim" and r.tags[REQUEST_TAG] == "req-1" for r in requests)
    results = _execute(run, requests)
    assert all(r.success for r in results)
    assert _materializations(instance) == dict.fromkeys(PAIRS, 1)
    rows = _rows(resources)
    assert set(rows) == set(PAIRS) and all(n > 0 for n in rows.values())
    for result in results:  # each pair's own metadata, not the batch's
        for mat in result.asset_materializations_for_node("duel_episodes"):
            author, solver = str(mat.partition).split("|")
            assert mat.metadata["num_rows"].value == rows[str(mat.partition)]
            assert mat.metadata["is_self_pair"].value == (author == solver)
            assert len(mat.metadata["pair_data_version"].value) == 16  # the pair's own content hash
        versions = {m.tags["dagster/data_version"] for m in result.asset_materializations_for_node("duel_episodes")}
        assert len(versions) == 1  # Dagster gives a ranged run one data version: the batch's
    evaluations = [e for r in results for e in r.get_asset_check_evaluations()]
    assert collections.Counter(str(e.partition) for e in evaluations) == dict.fromkeys(PAIRS, 7)  # seven checks each
    assert all(e.passed for e in evaluations)
    assert stage_statuses(instance, plan) == [StageStatus.SUCCEEDED]


@pytest.mark.slow  # ~20 s
def test_one_failing_pair_keeps_the_others_and_a_rerun_replays_without_duplicates(pipeline):
    instance, run, resources = pipeline
    for author in MODELS[:2]:  # novice has no environments yet: its pairs fail
        assert run("authored_environments", author).success
    authors, solvers = dimension_orders(instance)
    tags = {REQUEST_TAG: "req-2", "envduels/stage": "0", "dagster/asset_partition_range_start": f"{authors[0]}|{solvers[0]}",
            "dagster/asset_partition_range_end": f"{authors[-1]}|{solvers[-1]}"}  # one run, all nine pairs
    first = run("duel_episodes", tags=tags)
    assert not first.success
    failing = {p for p in PAIRS if p.startswith("novice|")}
    failure = next(e for e in first.all_events if e.is_step_failure).step_failure_data.error
    assert "3 of 9 pairs failed" in str(failure.message) and "novice" in str(failure.message)
    assert _materializations(instance) == dict.fromkeys(set(PAIRS) - failing, 1)
    assert set(_rows(resources)) == set(PAIRS) - failing
    kept = instance.fetch_materializations(dg.AssetKey("duel_episodes"), limit=100).records
    for record in kept:  # on the failure path each finished pair keeps its own content version
        mat = record.asset_materialization
        assert mat.tags["dagster/data_version"] == mat.metadata["pair_data_version"].value
    statuses = run_partitions(instance, instance.get_run_by_id(first.run_id))
    assert {p for p, s in statuses.items() if s == "FAILURE"} == failing and len(statuses) == 9
    plan = RequestPlan("req-2", "test", (Stage("pairs", 0, tuple(PAIRS)),))
    assert stage_statuses(instance, plan) == [StageStatus.FAILED]

    before = _rows(resources)
    assert run("authored_environments", "novice").success  # the cause fixed; the run re-executed (same tags)
    again = run("duel_episodes", tags=tags)
    assert again.success
    after = _rows(resources)  # asserts no episode twice
    assert set(after) == set(PAIRS) and all(after[p] == before[p] for p in before)
    assert _materializations(instance) == {p: 1 if p in failing else 2 for p in PAIRS}  # one per run that played it
    replayed = {str(r.partition_key): r.asset_materialization.metadata["pair_data_version"].value
                for r in instance.fetch_materializations(dg.AssetKey("duel_episodes"), limit=100).records
                if r.run_id == again.run_id}
    first_versions = {str(r.partition_key): r.asset_materialization.metadata["pair_data_version"].value for r in kept}
    assert set(replayed) == set(PAIRS) and all(replayed[p] == v for p, v in first_versions.items())  # a cached replay: same content, same version
    assert stage_statuses(instance, plan) == [StageStatus.SUCCEEDED]


def test_a_ranged_run_gets_the_provider_its_solvers_share():
    from envduels_dagster.instance.run_coordinator import provider_for

    pools = {"a": "p", "b": "p", "c": "q"}
    order = ["a", "b", "c"]
    rng = {"dagster/asset_partition_range_start": "a|a", "dagster/asset_partition_range_end": "c|b"}
    assert provider_for(rng, "pair_job", [], pools, order) == "p"  # solvers a..b
    wide = {**rng, "dagster/asset_partition_range_end": "c|c"}
    assert provider_for(wide, "pair_job", [], pools, order) is None  # two providers: no single limit applies


def test_a_backfill_from_the_ui_runs_author_rows_not_single_pairs(tmp_path, monkeypatch):
    """The asset backfill daemon's own run builder (the one it calls) on the pair asset's backfill policy."""
    from dagster._core.definitions.automation_tick_evaluation_context import (
        build_run_requests_with_backfill_policies,
    )
    from dagster._core.definitions.events import AssetKeyPartitionKey

    from envduels_dagster.definitions import build_definitions

    monkeypatch.setenv("ENVDUELS_REGISTRY", str(write_registry(tmp_path / "models.yaml", MODELS)))
    instance = dg.DagsterInstance.ephemeral()
    register_models(instance, MODELS)
    graph = build_definitions().resolve_asset_graph()
    key = dg.AssetKey("duel_episodes")
    with dg.partition_loading_context(dynamic_partitions_store=instance):
        requests = build_run_requests_with_backfill_policies(
            [AssetKeyPartitionKey(key, p) for p in PAIRS], graph, instance)
    assert len(requests) == 3  # one range per author (or solver), not nine runs
    covered = [p for r in requests for p in pairs_in_range(r.tags["dagster/asset_partition_range_start"],
                                                          r.tags["dagster/asset_partition_range_end"],
                                                          *dimension_orders(instance))]
    assert sorted(covered) == sorted(PAIRS)
