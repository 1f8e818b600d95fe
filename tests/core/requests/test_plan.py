"""``envduels plan``: the pairs the roles allow, the plan's arithmetic, and its figures against an actual run."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime

import duckdb
import pytest

from envduels_dagster.core.authoring.prompts import author_environments
from envduels_dagster.core.models import Gateway
from envduels_dagster.core.models.registry import DEFAULT_REGISTRY, load_registry
from envduels_dagster.core.play.episode import PlayConfig, play_pair
from envduels_dagster.core.requests.plan import DEFAULTS, PlanSettings, plan_experiment, planned_pairs
from envduels_dagster.core.requests.plan_report import actual_from_warehouse, compare_rows, measured_rates
from envduels_dagster.core.storage.warehouse import environments_frame, episodes_frame, replace_rows
from tests.helpers.plan_cli import ROLES, plan_cli


@pytest.fixture
def roles_registry(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text(ROLES)
    return load_registry(path)


def test_three_authors_and_one_learner_make_three_pairs(roles_registry):
    assert planned_pairs(roles_registry) == [("a1", "learner"), ("a2", "learner"), ("a3", "learner")]


def test_the_default_registry_plays_its_full_tournament():
    registry = load_registry(DEFAULT_REGISTRY)
    assert len(planned_pairs(registry)) == len(registry.names) ** 2


def test_authors_only_write_the_learner_only_plays_and_an_unpriced_model_is_not_free(roles_registry):
    plan = plan_experiment(roles_registry, PlanSettings(envs_per_author=10, seeds=8, rounds=1))
    per = plan.per_model()
    stages = {m: sorted({ln.stage for ln in plan.lines if ln.model == m}) for m in per}
    assert stages == {"a1": ["authoring r0", "hardening r1"], "a2": ["authoring r0", "hardening r1"],
                      "a3": ["authoring r0", "hardening r1"], "learner": ["play r0", "play r1"]}
    assert per["a1"].calls == 20  # 10 environments, then one hardening call per parent
    episodes_r0 = 3 * 10 * DEFAULTS["validity"] * 8 * 2
    play_r0 = next(ln for ln in plan.lines if ln.model == "learner" and ln.stage == "play r0")
    assert play_r0.calls == pytest.approx(episodes_r0 * DEFAULTS["turns"])
    assert play_r0.prompt_tokens == pytest.approx(play_r0.calls * DEFAULTS["play_prompt_tokens"])
    assert plan.unpriced == ["a3"] and per["a3"].usd is None and per["a1"].usd > 0
    total = plan.total()
    assert total.usd == pytest.approx(sum(per[m].usd for m in ("a1", "a2", "learner")))  # a3 not counted as $0
    assert per["learner"].hours == 0  # simulated models play in-process; a3 writes its 10 in waves of 4 ...
    remote = next(ln for ln in plan.lines if ln.model == "a3" and ln.stage == "authoring r0")
    assert remote.hours == pytest.approx(3 * DEFAULTS["author_latency_s"] / 3600)  # ... 3 waves at 60 s a call
    hardening = next(ln for ln in plan.lines if ln.model == "a3" and ln.stage == "hardening r1")
    assert hardening.hours == pytest.approx(2 * DEFAULTS["author_latency_s"] / 3600)  # 10 at once, 8 in flight
    assert plan.hours() == pytest.approx(remote.hours + hardening.hours)  # one stage after the other


def _run_and_store(registry, conn, k: int, seeds: int, gateway: Gateway | None = None) -> None:
    """Author and play every pair the roles allow, through the real gateway, and store it as the pipeline does."""
    now = datetime(2026, 12, 3)

    async def go():
        gw = gateway or Gateway(registry, None)
        envs = {a: await author_environments(gw, a, k, list(range(seeds))) for a in registry.authors}
        for a, specs in envs.items():
            replace_rows(conn, "environments", environments_frame(specs, "1", now), {"author": a})
        for a, s in planned_pairs(registry):
            recs = await play_pair(gw, s, envs[a], PlayConfig(concurrency=8))
            df = episodes_frame(recs, {e.env_id: e.max_turns for e in envs[a]}, "1", now, {e.env_id: 0 for e in envs[a]})
            replace_rows(conn, "episodes", df, {"author": a, "solver": s})
        await gw.aclose()

    asyncio.run(go())


def test_the_plan_against_an_actual_run_on_a_tiny_registry(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text(ROLES.replace("""  - name: a3
    model: openai/some-open-model
    api_base: http://127.0.0.1:9/v1
    roles: [author]
""", ""))
    registry = load_registry(path)
    settings = PlanSettings(envs_per_author=5, seeds=3, rounds=0)
    before = plan_experiment(registry, settings)  # nothing measured yet: the defaults
    conn = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    assert measured_rates(conn, registry) == {} and actual_from_warehouse(conn, registry) == []
    _run_and_store(registry, conn, 5, 3)
    actual = actual_from_warehouse(conn, registry)
    by = {(ln.model, ln.stage): ln for ln in actual}
    assert set(by) == {("a1", "authoring r0"), ("a2", "authoring r0"), ("learner", "play r0")}
    # authoring is counted exactly: one call per environment, and its prompt is counted from the text
    plan_lines = {(ln.model, ln.stage): ln for ln in before.lines}
    for a in ("a1", "a2"):
        assert by[(a, "authoring r0")].calls == plan_lines[(a, "authoring r0")].calls == 5
        assert by[(a, "authoring r0")].prompt_tokens == pytest.approx(plan_lines[(a, "authoring r0")].prompt_tokens,
                                                                      rel=0.02)
    # Defaults on 10 environments are coarse: an episode runs to its environment's max_turns (2 to 35 here) when
    # the learner fails, so a handful of environments decide the calls (the demo's scale: docs/BENCHMARKS.md)
    rows = {r["model"]: r for r in compare_rows(before.to_dict(), actual)}
    assert 1 / 3 < rows["total"]["plan_calls"] / rows["total"]["actual_calls"] < 3
    assert 1 / 3 < rows["total"]["plan_usd"] / rows["total"]["actual_usd"] < 3
    # re-planned from what the run measured, the plan reproduces the run
    measured = measured_rates(conn, registry)
    assert measured["learner"]["turns"].source.startswith("measured (")
    after = plan_experiment(registry, settings, measured)
    for r in compare_rows(after.to_dict(), actual):
        assert r["plan_calls"] == pytest.approx(r["actual_calls"], rel=0.01), r
        assert r["plan_tokens"] == pytest.approx(r["actual_tokens"], rel=0.03), r
        assert r["plan_usd"] == pytest.approx(r["actual_usd"], rel=0.03), r



def test_plan_prints_per_model_and_total_and_keeps_the_plan(monkeypatch, capsys, tmp_path):
    code, out, err = plan_cli(monkeypatch, capsys, tmp_path, ROLES, {}, "--envs-per-author", "4")
    assert code == 0, err
    assert "plan: 3 pairs (3 author(s) x 1 solver(s)), 4 environments per author, 8 seeds x 2 conditions" in out
    assert "unpriced (no input/output_cost_per_mtok in the registry; not counted as $0): a3" in out
    assert "| unpriced" not in out and "$0.00 " not in out
    kept = list((tmp_path / "home" / "plans").glob("plan-*.json"))
    assert len(kept) == 1
    code, out, _ = plan_cli(monkeypatch, capsys, tmp_path, ROLES, {}, "--compare")
    assert code == 0 and "plan calls" in out and "total" in out  # nothing ran yet: every actual is 0


A3_CAPPED = ROLES.replace("    api_base: http://127.0.0.1:9/v1\n", "    api_base: http://127.0.0.1:9/v1\n    budget_usd: 2\n")


@pytest.mark.parametrize("registry_text, env, expected", [
    (ROLES, {"ENVDUELS_BUDGET_USD": "lots"}, "budget: ENVDUELS_BUDGET_USD='lots' is not a number"),
    (ROLES, {"ENVDUELS_BUDGET_USD": "-3"}, "budget: ENVDUELS_BUDGET_USD='-3' cannot be used: a budget must be a positive"),
    (ROLES + "    budget_usd: -1\n", {}, "registry error: "),
    (A3_CAPPED, {}, "budget: "),
])
def test_bad_budgets_are_refused_with_a_clear_message_and_nothing_is_written(monkeypatch, capsys, tmp_path,
                                                                             registry_text, env, expected):
    code, out, err = plan_cli(monkeypatch, capsys, tmp_path, registry_text, env)
    assert code == 2 and out == ""
    assert err.startswith(f"envduels: error: {expected}")
    if "budget_usd: -1" in registry_text:
        assert "entry #4 ('learner'): field 'budget_usd': Input should be greater than 0" in err
    if registry_text is A3_CAPPED:
        assert "model(s) a3 have no price, so its budget_usd cannot be enforced" in err
    assert not (tmp_path / "home" / "plans").exists()


def test_a_solver_of_unknown_skill_gets_a_range_and_a_measured_one_does_not(roles_registry):
    from envduels_dagster.core.requests.plan import FILL_RANGE, Rate, model_rates, with_fill
    from envduels_dagster.core.requests.plan_report import format_plan

    settings = PlanSettings(envs_per_author=10, seeds=4, rounds=0)
    plan = plan_experiment(roles_registry, settings)
    assert plan.span is not None
    low, high = plan.span
    total = plan.total()
    assert low.calls < total.calls < high.calls and low.usd < total.usd < high.usd
    # calls scale with the fill; the prompt per call grows with it too (each call carries the earlier turns)
    assert high.calls / low.calls == pytest.approx(FILL_RANGE[1] / FILL_RANGE[0], rel=0.01)
    assert high.prompt_tokens / low.prompt_tokens > high.calls / low.calls
    rates = model_rates(roles_registry.get("learner"), {})
    same = with_fill(rates, DEFAULTS["turn_fill"])  # at the default fill: exactly the default rates
    assert same["turns"].value == pytest.approx(DEFAULTS["turns"])
    assert same["play_prompt_tokens"].value == pytest.approx(DEFAULTS["play_prompt_tokens"])
    text = format_plan(plan, roles_registry, None)
    assert f"calls, ${low.usd:,.4f}-" in text or f"calls, ${low.usd:,.2f}-" in text
    assert "solver skill is unknown before play" in text and "environment lengths are the defaults'" in text
    # a learner whose skill a pilot measured: no range left to state
    measured = {"learner": {"turns": Rate(7.0, "measured (40 episodes)"), "turn_fill": Rate(0.7, "measured (40 episodes)"),
                            "play_prompt_tokens": Rate(300.0, "measured (40 episodes)")}}
    assert plan_experiment(roles_registry, settings, measured).span is None


def test_a_pilot_slice_plays_the_environments_spread_over_their_lengths():
    from envduels_dagster.core.requests.pilot import envs_per_pair
    from envduels_dagster.core.requests.plan import spread

    lengths = [30, 2, 9, 5, 12, 20]
    assert sorted(lengths[i] for i in spread(lengths, 3)) == [2, 9, 30]  # shortest, middle, longest
    assert spread(lengths, 10) == list(range(6)) and len(spread(lengths, 1)) == 1
    assert envs_per_pair(3) == 6 and envs_per_pair(5) == 4 and envs_per_pair(1) == 16  # ~32 episodes a solver


def test_the_pilot_states_its_price_and_runs_only_when_asked(monkeypatch, capsys, tmp_path):
    tiny = ROLES.replace("""  - name: a3
    model: openai/some-open-model
    api_base: http://127.0.0.1:9/v1
    roles: [author]
""", "")
    sizes = {"ENVDUELS_ENVS_PER_AUTHOR": "3", "ENVDUELS_SEEDS": "2", "ENVDUELS_ROUNDS": "0"}
    home = tmp_path / "home"
    code, out, err = plan_cli(monkeypatch, capsys, tmp_path, tiny, sizes, "--pilot")  # stdin is not a terminal here
    assert code == 0, err
    assert out.startswith("pilot: every author writes its round 0 as the run will (3 environments), then each of "
                          "the 2 pairs plays 3 of them")
    assert "pilot not run: add --yes to run it" in out
    assert not (home / "plans").exists() and not (home / "cache").exists()  # nothing paid, nothing kept
    code, out, err = plan_cli(monkeypatch, capsys, tmp_path, tiny, sizes, "--pilot", "--yes")
    assert code == 0, err
    assert out.index("about ") < out.index("pilot done: 12 episodes")
    assert "learner pilot-measured (12 episodes)" in out and "a1 pilot-measured (3 environments), r0 authored" in out
    assert "range: " not in out  # the learner's skill is measured now
    assert (home / "plans" / "pilot.duckdb").is_file()
    planned = json.loads(max((home / "plans").glob("plan-*.json")).read_text())
    # the run: the same authoring and the pilot's episodes come from the call cache, and the plan holds
    from envduels_dagster.core.models.call_cache import open_call_cache
    from envduels_dagster.settings.locations import cache_location

    registry = load_registry(tmp_path / "models.yaml")
    conn = duckdb.connect(str(tmp_path / "run.duckdb"))
    gw = Gateway(registry, open_call_cache(cache_location()))
    _run_and_store(registry, conn, 3, 2, gw)
    assert sum(gw.stats.cache_hits.values()) >= 6 + 0.4 * sum(gw.stats.backend_calls.values())
    total = {r["model"]: r for r in compare_rows(planned, actual_from_warehouse(conn, registry))}["total"]
    assert total["plan_calls"] == pytest.approx(total["actual_calls"], rel=0.10)
    assert total["plan_usd"] == pytest.approx(total["actual_usd"], rel=0.20)


@pytest.mark.parametrize("argv, expected", [
    (["--yes"], "--yes only goes with --pilot"),
    (["--pilot", "--compare"], "--pilot and --compare do not go together"),
])
def test_pilot_flags_that_do_not_go_together_are_refused(monkeypatch, capsys, tmp_path, argv, expected):
    code, out, err = plan_cli(monkeypatch, capsys, tmp_path, ROLES, {}, *argv)
    assert code == 2 and out == "" and err.startswith(f"envduels: error: {expected}")
    assert not (tmp_path / "home").exists()


def test_the_lift_study_pays_for_no_held_out_environments_when_no_learner_can_be_trained(roles_registry):
    """A registry of real learners has no trainer: the study used to author 3 held-out environments per author
    anyway (6 paid calls in the README's 2 x 1 rehearsal, counted on serve-sim) that no plan counted."""
    import pandas as pd

    from envduels_dagster.core.studies.learning import COLUMNS
    from envduels_dagster.core.studies.lift import StudyConfig, StudyTables, run_study

    gw = Gateway(roles_registry, None)
    df = asyncio.run(run_study(gw, {}, StudyTables(pd.DataFrame(), pd.DataFrame(), pd.DataFrame()),
                               StudyConfig(("a1", "a2"), 3, (0, 1), "all_valid")))
    assert list(df.columns) == COLUMNS and df.empty
    assert sum(gw.stats.backend_calls.values()) == 0 and sum(gw.stats.cache_hits.values()) == 0
