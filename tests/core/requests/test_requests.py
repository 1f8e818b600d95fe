"""Request plans: what adding a model or a stale partition runs, in which order, and when to move on."""

import pytest

from envduels_dagster.core.requests.stages import (
    RequestBook,
    RequestPlan,
    StageStatus,
    next_step,
    plan_new_models,
    plan_refresh,
    plan_stale,
    stage_status,
)

MODELS = ["a", "b", "c", "d"]


def test_a_new_model_gets_every_round_in_order_then_one_downstream_refresh():
    plan = plan_new_models("new-1", ["d"], MODELS, rounds=2)
    kinds = [(s.kind, s.round) for s in plan.stages]
    assert kinds == [("authors", 0), ("pairs", 0), ("authors", 1), ("pairs", 1), ("authors", 2), ("pairs", 2),
                     ("downstream", None), ("learners", None), ("studies", None)]
    for stage in plan.stages:
        if stage.kind == "authors":
            assert stage.partitions == ("d",)
        if stage.kind == "pairs":  # 2N+1 pairs with N = 3 existing models
            assert len(stage.partitions) == 7 and all("d" in p.split("|") for p in stage.partitions)
    assert plan.stages[-2].partitions == tuple(MODELS)


def test_live_panel_rehardens_every_author_from_round_one():
    plan = plan_new_models("new-1", ["d"], MODELS, rounds=1, panel_mode="live")
    assert plan.stages[0].partitions == ("d",) and len(plan.stages[1].partitions) == 7
    assert plan.stages[2].partitions == tuple(MODELS) and len(plan.stages[3].partitions) == 16


def test_unknown_panel_mode_and_unregistered_newcomer_are_refused_with_the_name():
    with pytest.raises(ValueError, match="'wobbly'"):
        plan_new_models("x", ["d"], MODELS, 1, panel_mode="wobbly")
    with pytest.raises(ValueError, match=r"\['z'\]"):
        plan_new_models("x", ["z"], MODELS, 1)


def test_a_stale_author_carries_its_change_through_later_rounds_and_all_its_pairs():
    plan = plan_stale("stale-1", ["b"], [("c", "a")], MODELS, rounds=1)
    assert [(s.kind, s.round) for s in plan.stages][:4] == [("authors", 0), ("pairs", 0), ("authors", 1), ("pairs", 1)]
    pairs = set(plan.stages[1].partitions)
    assert pairs == {"b|a", "b|b", "b|c", "b|d", "c|a"} == set(plan.stages[3].partitions)
    assert plan_stale("stale-2", [], [], MODELS, rounds=1) is None


def test_plans_round_trip_through_json():
    plan = plan_new_models("new-7", ["c", "d"], MODELS, rounds=1)
    assert RequestPlan.from_json(plan.to_json()) == plan


def test_stage_status_takes_the_latest_run_of_each_partition():
    parts = ["a|b", "a|c"]
    assert stage_status(parts, {}) is StageStatus.NOT_LAUNCHED
    assert stage_status(parts, {"a|b": "SUCCESS", "a|c": "QUEUED"}) is StageStatus.RUNNING
    assert stage_status(parts, {"a|b": "SUCCESS"}) is StageStatus.RUNNING  # one not created yet
    assert stage_status(parts, {"a|b": "SUCCESS", "a|c": "FAILURE"}) is StageStatus.FAILED
    assert stage_status(parts, {"a|b": "SUCCESS", "a|c": "SUCCESS"}) is StageStatus.SUCCEEDED
    assert stage_status([], {"": "STARTED"}, unpartitioned=True) is StageStatus.RUNNING


def test_next_step_launches_the_first_unfinished_stage_and_stops_at_a_failure():
    plan = plan_refresh("refresh-1", MODELS, "pairs run by hand")
    S = StageStatus
    assert next_step(plan, [S.NOT_LAUNCHED] * 3).action == "launch"
    assert next_step(plan, [S.SUCCEEDED, S.RUNNING, S.NOT_LAUNCHED]) .stage == 1
    failed = next_step(plan, [S.SUCCEEDED, S.FAILED, S.NOT_LAUNCHED])
    assert failed.action == "failed" and failed.stage == 1 and "nothing downstream" in failed.message
    assert next_step(plan, [S.SUCCEEDED] * 3).action == "done"
    with pytest.raises(ValueError):
        next_step(plan, [S.SUCCEEDED])


def test_request_book_survives_its_cursor_and_ignores_an_old_style_cursor():
    book = RequestBook()
    plan = plan_new_models(book.new_id("new"), ["d"], MODELS, rounds=1)
    book.add(plan)
    again = RequestBook.from_json(book.to_json())
    assert again.plans() == [plan] and again.counter == 1
    assert "d|a" in again.busy_partitions()
    again.finish(plan.request_id)
    assert again.open == {} and again.finished == [plan.request_id]
    assert RequestBook.from_json('["new:author:x:v1"]').open == {}


def test_the_provider_tag_follows_the_model_a_run_calls_however_it_was_launched():
    from envduels_dagster.instance.run_coordinator import provider_for

    pools = {"a": "openai", "b": "envduels-sim"}
    pair = {"dagster/partition": "a|b", "dagster/partition/author": "a", "dagster/partition/solver": "b"}
    assert provider_for(pair, "__ASSET_JOB", ["duel_episodes"], pools) == "envduels-sim"  # the solver plays
    assert provider_for({"dagster/partition": "a"}, "author_job", [], pools) == "openai"  # sensor, by job name
    assert provider_for({"dagster/partition": "a"}, "__ASSET_JOB", ["hardened_environments_r2"], pools) == "openai"
    assert provider_for({"dagster/partition": "a"}, "__ASSET_JOB", ["training_set"], pools) is None  # no calls
    assert provider_for({}, "downstream_job", [], pools) is None
