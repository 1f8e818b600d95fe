"""A spending cap in real Dagster runs: a pair stopped part-way, a run over budget from its first call, bad values."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import urllib.request

import dagster as dg
import duckdb
import pytest

from envduels_dagster.assets.authoring.assets import authored_environments
from envduels_dagster.assets.duels.assets import duel_episodes
from envduels_dagster.assets.registry.partitions import pair_key, register_models
from envduels_dagster.core.models.budget import BudgetLedger, Caps
from tests.helpers.pipeline import pipeline_resources
from tests.helpers.sim_server import SimServerProcess

QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


def _registry(path, **budgets: str) -> None:
    """expert writes; novice (served over HTTP by serve-sim) and apprentice play, each test with its own, so the
    tests share one authored warehouse."""
    lines = ["models:"]
    for name in ("expert", "novice", "apprentice"):
        model = [f"    model: envduels-sim/{name}"] if name != "novice" else [
            "    model: openai/novice", f"    api_base: {SERVER['base']}", "    request_contract: true"]
        lines += [f"  - name: {name}", *model, "    input_cost_per_mtok: 1", "    output_cost_per_mtok: 1"]
        lines += [f"    budget_usd: {budgets[name]}"] if name in budgets else []
    path.write_text("\n".join(lines) + "\n")


SERVER: dict[str, str] = {}


def _served() -> int:
    """Chat requests the serve-sim server has answered so far (its own count)."""
    with urllib.request.urlopen(SERVER["base"].removesuffix("/v1") + "/health") as resp:
        return int(json.loads(resp.read())["requests"])


def _run(asset, instance, resources, key):
    result = dg.materialize([asset], instance=instance, resources=resources, partition_key=key, run_config=QUIET,
                            raise_on_error=False)
    failures = " ".join(str(e.event_specific_data.error.message) for e in result.all_events  # type: ignore[union-attr]
                        if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    return result, failures


def _episodes(tmp_path, where: str = "TRUE"):
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as conn:
        return conn.execute(f"SELECT * FROM episodes WHERE {where}").df()


@pytest.fixture(scope="module")
def world(tmp_path_factory, request):
    """expert's environments authored once; each test plays its own pair on them."""
    server = SimServerProcess()
    SERVER["base"] = server.base
    request.addfinalizer(server.stop)
    tmp_path = tmp_path_factory.mktemp("budget")
    registry = tmp_path / "models.yaml"
    _registry(registry)
    resources = pipeline_resources(tmp_path, registry, envs_per_author=3, seeds=(0, 1), episode_concurrency=1)
    instance = dg.DagsterInstance.ephemeral()
    register_models(instance, ["expert", "novice", "apprentice"])
    result, _ = _run(authored_environments, instance, resources, "expert")
    assert result.success
    return tmp_path, registry, resources, instance


@pytest.mark.slow  # 39 s at load 18 on 2 cores (two pair runs over HTTP)
def test_a_model_cap_stops_a_pair_part_way_and_a_higher_cap_finishes_it_without_paying_twice(world):
    tmp_path, registry, resources, instance = world
    _registry(registry, novice="0.05")
    served_before = _served()
    result, _ = _run(duel_episodes, instance, resources, pair_key("expert", "novice"))
    assert result.success
    md = result.asset_materializations_for_node("duel_episodes")[0].metadata
    df = _episodes(tmp_path, "solver = 'novice'")
    stopped = df[df["stop_reason"] == "stopped_at_budget"]
    finished = df[df["status"] != "incomplete"]
    assert len(stopped) > 0 and len(finished) > 0  # part-way
    assert set(stopped["status"]) == {"incomplete"}  # never a failure, left out of every statistic
    assert md["stopped_at_budget"].value == len(stopped) and md["partial"].value is True
    assert "raise budget_usd / ENVDUELS_BUDGET_USD and re-materialize" in md["budget_note"].value
    assert "stopped at budget (left: $" in md["budget_note"].value  # issue 44: what is left, per cap
    assert "of novice's budget_usd=$0.05)" in md["budget_note"].value
    ledger = BudgetLedger(tmp_path / "cache" / "budget.sqlite", Caps())
    first = ledger.spent()["novice"]
    assert first["usd"] <= 0.05 and _served() - served_before == first["calls"]  # the refused calls never left

    _registry(registry, novice="100")  # raise the cap and re-run: the calls already made come from the cache
    result, _ = _run(duel_episodes, instance, resources, pair_key("expert", "novice"))
    assert result.success
    md = result.asset_materializations_for_node("duel_episodes")[0].metadata
    df = _episodes(tmp_path, "solver = 'novice'")
    assert (df["stop_reason"] == "stopped_at_budget").sum() == 0 and md["partial"].value is False
    assert md["cache_hits"].value >= first["calls"]
    # every call of the finished pair reached the server, and was paid, exactly once across the two runs
    assert _served() - served_before == ledger.spent()["novice"]["calls"] == first["calls"] + md["model_calls"].value
    assert md["model_calls"].value + md["cache_hits"].value == int(df["model_calls"].sum())


def test_a_run_over_budget_from_its_first_call_stops_with_the_reason_and_writes_nothing(world):
    tmp_path, registry, resources, instance = world
    _registry(registry, apprentice="0.000001")
    result, failures = _run(duel_episodes, instance, resources, pair_key("expert", "apprentice"))
    assert not result.success
    assert "expert x apprentice stopped at budget before any episode finished; nothing was written" in failures
    assert "model 'apprentice''s budget_usd of $1e-06 would be passed" in failures
    assert "left, the next call of 'apprentice'" in failures and "raise its budget_usd and re-run" in failures
    from envduels_dagster.cli.demo import _budget_stop  # the demo's line for such a run: not just "see run ..."

    line = _budget_stop(result)
    assert line.startswith(": ") and "stopped at budget before any episode finished" in line and "left" in line
    assert _episodes(tmp_path, "solver = 'apprentice'").empty
    # authoring over budget: the run fails naming the cap, no environment of that author is written
    result, failures = _run(authored_environments, instance, resources, "apprentice")
    assert not result.success and "stopped_at_budget" in failures and "nothing was written" in failures
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM environments WHERE author = 'apprentice'").fetchone() == (0,)


def test_a_non_numeric_overall_budget_fails_the_run_before_any_call(world, monkeypatch):
    tmp_path, registry, resources, instance = world
    _registry(registry)
    monkeypatch.setenv("ENVDUELS_BUDGET_USD", "ten dollars")
    ledger = tmp_path / "cache" / "budget.sqlite"

    def rows():  # the ledger's records (its file's header changes when an earlier test's WAL is checkpointed)
        if not ledger.exists():
            return None
        with contextlib.closing(sqlite3.connect(ledger)) as conn:
            return conn.execute("SELECT * FROM spend ORDER BY id").fetchall()

    before = rows()
    result, failures = _run(duel_episodes, instance, resources, pair_key("expert", "apprentice"))
    assert not result.success
    assert "budget: ENVDUELS_BUDGET_USD='ten dollars' is not a number" in failures
    assert "no model was called and nothing was written" in failures
    assert _episodes(tmp_path, "solver = 'apprentice'").empty
    assert rows() == before
