"""The domain policies that used to live in Dagster assets, tested on plain frames and records.

Training-set building and lineage supersession, the pair-play switch and the "every call
failed" rule, staleness read from a real DuckDB warehouse, progress correlations, the lift
study's training choice, sim model strings and the UI text. None of these tests imports Dagster.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass

import duckdb
import pandas as pd
import pytest

from envduels_dagster.core.models.capabilities import skill_ranks, trainers
from envduels_dagster.core.play.pair import (
    AllCallsFailed,
    PairOptions,
    environments_current,
    pair_summary,
    play_pair_with,
    require_model_reached,
)
from envduels_dagster.core.rankings.reporting import lift_grid, markdown_table
from envduels_dagster.core.training.training_set import COLUMNS, TrainingRule, build_training_set, superseded_env_ids


def episodes_of(results: dict[tuple[str, str, str], list[tuple[str, str]]]) -> pd.DataFrame:
    """(env_id, author, solver) -> per seed (cold status, hinted status)."""
    rows = []
    for (env, author, solver), seeds in results.items():
        for seed, statuses in enumerate(seeds):
            for condition, status in zip(("cold", "hinted"), statuses):
                rows.append({"env_id": env, "author": author, "solver": solver, "seed": seed,
                             "condition": condition, "status": status, "round": 0})
    return pd.DataFrame(rows)


def env_rows(specs: list[tuple[str, str, bool, str | None]]) -> pd.DataFrame:
    return pd.DataFrame([{"env_id": e, "author": a, "valid": v, "parent_env_id": p, "domain": "maze",
                          "class_name": "Maze", "max_turns": 8, "source_sha256": f"sha-{e}", "hint": f"hint {e}",
                          "benchmark_seeds": [0, 1, 2, 3], "author_version": "1"} for e, a, v, p in specs])


S, F = "success", "failure"
LEARNABLE = [(F, S)] * 4
WASTED = [(S, S)] * 4
NOISE = [(F, F)] * 4


def test_a_valid_child_supersedes_its_parent_but_an_invalid_child_does_not():
    envs = env_rows([("p1", "a", True, None), ("c1", "a", True, "p1"),
                     ("p2", "a", True, None), ("c2", "a", False, "p2")])
    assert superseded_env_ids(envs) == {"p1"}


def test_training_set_keeps_learnable_peer_environments_ranked_with_provenance():
    envs = env_rows([("e1", "a", True, None), ("e2", "a", True, None), ("e3", "b", True, None),
                     ("own", "learner", True, None)])
    half = [(F, S), (F, S), (F, F), (F, F)]  # p_hint 0.5: admitted at min_hint 0.5, with lower lift
    episodes = episodes_of({("e1", "a", "learner"): half, ("e2", "a", "learner"): LEARNABLE,
                            ("e3", "b", "learner"): WASTED, ("own", "learner", "learner"): LEARNABLE})
    built = build_training_set("learner", episodes, envs, TrainingRule(max_cold=0.0, min_hint=0.5, method="rule"))
    rows = built.rows
    assert list(rows.columns) == COLUMNS
    assert list(rows["env_id"]) == ["e2", "e1"] and list(rows["rank"]) == [1, 2]
    assert rows.iloc[0]["lift"] == 1.0 and rows.iloc[1]["lift"] == 0.5
    assert rows.iloc[0]["source_sha256"] == "sha-e2" and rows.iloc[0]["benchmark_seeds"] == [0, 1, 2, 3]
    # a real posterior interval: 4 seeds never pin the lift (it used to be a zero-width bootstrap)
    assert ((rows["lift_upper"] - rows["lift_lower"]) > 0.3).all()
    assert ((rows["lift_lower"] >= -1) & (rows["lift_upper"] <= 1)).all()
    assert built.categories == {"learnable": 2, "wasted": 1}  # its own environment is not a peer result
    with_self = build_training_set("learner", episodes, envs, TrainingRule(include_self_authored=True, method="rule"))
    assert "own" in set(with_self.rows["env_id"])
    strict = build_training_set("learner", episodes, envs, TrainingRule(min_hint=0.75, method="rule"))
    assert list(strict.rows["env_id"]) == ["e2"]


def test_probability_admission_orders_by_evidence_and_reports_expected_false_admissions():
    envs = env_rows([("e1", "a", True, None), ("e2", "a", True, None), ("e3", "b", True, None)])
    half = [(F, S), (F, S), (F, F), (F, F)]
    episodes = episodes_of({("e1", "a", "learner"): half, ("e2", "a", "learner"): LEARNABLE,
                            ("e3", "b", "learner"): WASTED})
    loose = build_training_set("learner", episodes, envs, TrainingRule(threshold=0.01))
    p = dict(zip(loose.rows["env_id"], loose.rows["p_learnable"]))
    assert p["e2"] > p["e1"] > 0  # 4/4 hinted is stronger evidence than 2/4; e3 (passes cold) scores lowest
    assert p.get("e3", 0.0) < p["e1"]
    assert loose.expected_false_admissions == pytest.approx(sum(1 - v for v in p.values()))
    assert loose.note.startswith("insufficient data: the prior of the rates rests on 3")
    tight = build_training_set("learner", episodes, envs, TrainingRule(threshold=(p["e2"] + p["e1"]) / 2))
    assert list(tight.rows["env_id"]) == ["e2"] and (tight.rows["admission_threshold"] > 0).all()
    with pytest.raises(ValueError, match="threshold"):
        TrainingRule(threshold=0.0)


def test_training_set_takes_the_child_not_the_superseded_parent():
    envs = env_rows([("p", "a", True, None), ("c", "a", True, "p")])
    episodes = episodes_of({("p", "a", "learner"): LEARNABLE, ("c", "a", "learner"): LEARNABLE})
    assert list(build_training_set("learner", episodes, envs).rows["env_id"]) == ["c"]


def test_no_episodes_give_an_empty_training_set_with_the_table_columns():
    empty = pd.DataFrame(columns=["env_id", "author", "solver", "seed", "condition", "status", "round"])
    built = build_training_set("learner", empty, env_rows([("e", "a", True, None)]))
    assert built.rows.empty and list(built.rows.columns) == COLUMNS and built.categories == {}


@dataclass
class Rec:
    stop_reason: str
    error: str | None = None


def test_a_pair_whose_every_call_failed_is_refused_with_the_first_error():
    with pytest.raises(AllCallsFailed, match="every episode of a x s failed to reach the model.*timeout 1"):
        require_model_reached([Rec("llm_error", "timeout 1"), Rec("llm_error", "timeout 2")], "a", "s")
    require_model_reached([Rec("llm_error", "timeout"), Rec("terminated")], "a", "s")  # one reached it
    require_model_reached([], "a", "s")  # no valid environment: nothing to refuse


def test_environments_are_current_only_when_every_row_has_the_registry_version():
    rows = env_rows([("e1", "a", True, None), ("e2", "a", True, None)])
    assert environments_current(rows, "1")
    assert not environments_current(rows, "2")
    assert not environments_current(rows.assign(author_version=["1", "2"]), "1")
    assert not environments_current(rows.iloc[0:0], "1")


def test_pair_summary_counts_only_completed_episodes():
    df = episodes_of({("e", "a", "s"): [(F, S), (F, S), (S, S), ("incomplete", "incomplete")]})
    summary = pair_summary(df)
    assert summary["pass_rate_cold"] == pytest.approx(1 / 3) and summary["pass_rate_hinted"] == 1.0
    assert summary["lift"] == pytest.approx(2 / 3)


def test_the_pair_switch_plays_fixed_or_adaptive_seeds_on_real_environments(sim_registry):
    from envduels_dagster.core.authoring.prompts import author_environments
    from envduels_dagster.core.models import Gateway
    from envduels_dagster.core.models.registry import load_registry
    from envduels_dagster.core.play.adaptive import AdaptivePolicy

    gateway = Gateway(load_registry(sim_registry(["journeyman", "oracle"])))

    progress: dict[str, list] = {"fixed": [], "adaptive": []}

    async def go():
        envs = await author_environments(gateway, "journeyman", 2, [0, 1, 2, 3])
        fixed = await play_pair_with(gateway, "journeyman", "oracle", envs, PairOptions(
            concurrency=4, on_progress=lambda done, total: progress["fixed"].append((done, total))))
        adaptive = await play_pair_with(gateway, "journeyman", "oracle", envs, PairOptions(
            concurrency=4, adaptive=AdaptivePolicy(max_seeds=6),
            on_progress=lambda done, total: progress["adaptive"].append((done, total))))
        return envs, fixed, adaptive

    envs, fixed, adaptive = asyncio.run(go())
    valid = [e for e in envs if e.valid]
    assert valid and fixed.adaptive == {}
    assert len(fixed.records) == sum(2 * len(e.benchmark_seeds) for e in valid)
    assert adaptive.adaptive["adaptive_seeds_fixed"] == sum(len(e.benchmark_seeds) for e in valid)
    assert adaptive.adaptive["adaptive_seeds_played"] * 2 == len(adaptive.records)
    # Both switches report each finished episode to the caller (the adaptive one used to drop on_progress):
    # the fixed design knows its total, the adaptive one does not (-1).
    assert [done for done, _ in progress["fixed"]] == list(range(1, len(fixed.records) + 1))
    assert {total for _, total in progress["fixed"]} == {len(fixed.records)}
    assert [done for done, _ in progress["adaptive"]] == list(range(1, len(adaptive.records) + 1))
    assert {total for _, total in progress["adaptive"]} == {-1}


def test_staleness_reads_versions_and_seeds_from_a_real_warehouse(tmp_path):
    from envduels_dagster.core.requests.staleness import stale_partitions
    from envduels_dagster.core.storage.warehouse import ensure_schema, replace_rows

    with duckdb.connect(str(tmp_path / "w.duckdb")) as conn:
        assert stale_partitions(conn, {"a": "1"}, [0, 1]) == ([], [])  # fresh warehouse: nothing recorded
        ensure_schema(conn)
        envs = env_rows([("ea", "a", True, None), ("eb", "b", True, None)]).assign(round=0,
                                                                                  benchmark_seeds=[[0, 1]] * 2)
        replace_rows(conn, "environments", envs.reindex(columns=[c for c in envs.columns]))
        eps = episodes_of({("ea", "a", "b"): LEARNABLE[:2], ("eb", "b", "a"): LEARNABLE[:2]}).assign(solver_version="1")
        replace_rows(conn, "episodes", eps)
        assert stale_partitions(conn, {"a": "1", "b": "1"}, [0, 1]) == ([], [])
        assert stale_partitions(conn, {"a": "2", "b": "1"}, [0, 1]) == (["a"], [("a", "b"), ("b", "a")])
        assert stale_partitions(conn, {"a": "1", "b": "1"}, [0, 1, 2]) == (["a", "b"], [("a", "b"), ("b", "a")])


def test_skill_vs_change_correlates_round_one_only():
    from envduels_dagster.core.rankings.progress import COLUMNS as PROGRESS
    from envduels_dagster.core.rankings.progress import skill_vs_change

    df = pd.DataFrame([{c: 0.0 for c in PROGRESS} | {"author": a, "round": r, "solver_skill": k,
                                                       "design_change": k, "hint_change": -k}
                       for a, r, k in [("a", 1, 0.1), ("b", 1, 0.2), ("c", 1, 0.3), ("d", 1, 0.4), ("e", 1, 0.5),
                                       ("a", 2, 0.9)]], columns=PROGRESS)
    out = skill_vs_change(df)
    assert out["skill_vs_design_change_rho"] == pytest.approx(1.0)
    assert out["skill_vs_hint_change_rho"] == pytest.approx(-1.0)
    assert 0 < out["skill_vs_design_change_p"] < 0.05


def test_skill_ranks_and_trainers_come_from_the_providers_that_offer_them():
    from envduels_dagster.sim.profiles import PROFILES
    from envduels_dagster.sim.training import ProfileGateway

    models = [("x", "envduels-sim/expert"), ("y", "openai/gpt-4o-mini"), ("z", "envduels-sim/unknown"),
              ("w", "envduels-sim/novice@puzzle"), ("v", "nosuchprefix/m")]
    assert skill_ranks(models) == {"x": PROFILES["expert"].skill_rank, "w": PROFILES["novice"].skill_rank}

    class Entry:
        def __init__(self, name, model):
            self.name, self.model = name, model

    found, skipped = trainers([Entry("e", "envduels-sim/expert"), Entry("g", "openai/gpt-4o-mini")])
    assert list(found) == ["e"] and skipped == ["g"]
    assert isinstance(found["e"]([]), ProfileGateway)  # trained on nothing: the profile itself


def test_ui_tables_and_the_lift_grid_mark_intervals_and_self_pairs():
    assert markdown_table(pd.DataFrame()) == "_no rows_"
    assert markdown_table(pd.DataFrame({"a": [0.5], "b": ["x"]})) == "| a | b |\n|---|---|\n| 0.50 | x |"
    pair = pd.DataFrame({"author": ["a", "a", "b"], "solver": ["a", "b", "a"], "lift": [0.5, 0.25, 0.1],
                         "lift_ci_lower": [0.1, 0.05, float("nan")], "lift_ci_upper": [0.9, 0.5, float("nan")]})
    grid = lift_grid(pair)  # no tests: nothing is bold, whatever the interval says
    assert "_+0.50 [+0.10, +0.90]_" in grid and "| +0.25 [+0.05, +0.50] |" in grid and "+0.10 [n/a]" in grid
    assert "**+" not in grid
    tests = pd.DataFrame({"author": ["a", "b"], "solver": ["b", "a"], "is_self_pair": [False, False],
                          "p_value": [0.001, float("nan")], "decided": [True, False], "method": ["holm (x)"] * 2})
    grid = lift_grid(pair, tests)
    assert "**+0.25 [+0.05, +0.50]**" in grid and "| +0.10 [n/a] |" in grid and "holm (x) over the 1 peer" in grid


def test_these_policies_need_no_dagster():
    import subprocess

    code = ("import sys; import envduels_dagster.core.training.training_set, envduels_dagster.core.play.pair, "
            "envduels_dagster.core.authoring.hardening, envduels_dagster.core.rankings.progress, envduels_dagster.core.studies.lift, "
            "envduels_dagster.core.requests.staleness, envduels_dagster.core.rankings.reporting, envduels_dagster.core.models.capabilities; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dagster', 'dagster_duckdb', 'dagster_dbt')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_hardening_inputs_do_not_depend_on_row_order_or_on_which_author_hardened_first(tmp_path):
    """A round's brief is a function of the warehouse's earlier rounds: parents in slot order (the child's slot
    and seed follow it) however the rows were written, and other authors' hints of earlier rounds only, sorted
    (another author's same-round hint exists or not depending on which run went first)."""
    import datetime as dt

    from envduels_dagster.core.authoring.hardening import read_hardening_inputs
    from envduels_dagster.core.protocol import EnvironmentSpec
    from envduels_dagster.core.storage.warehouse import environments_frame, replace_rows

    def spec(author, round_, slot, hint):
        return EnvironmentSpec(env_id=f"{author}.r{round_}.{slot}.{slot:08x}", author=author, class_name="C",
                               max_turns=3, source=f"# {author} {round_} {slot}", hint=hint, round=round_)

    now = dt.datetime(2026, 12, 1)
    # slots 0..11 written in a scrambled order (slot 10 sorts before 2 as text)
    mine = [spec("a", 0, s, f"own {s}") for s in (11, 2, 10, 0, 1, 9, 3, 8, 4, 7, 5, 6)]
    theirs = [spec("b", 0, 0, "zeta"), spec("b", 0, 1, "alpha"), spec("b", 1, 0, "written by b in round 1 first")]
    with duckdb.connect(str(tmp_path / "w.duckdb")) as conn:
        replace_rows(conn, "environments", environments_frame(mine, "v", now), {"author": "a"})
        replace_rows(conn, "environments", environments_frame(theirs, "v", now), {"author": "b"})
        inputs = read_hardening_inputs(conn, "a", 1)
    assert [p.env_id.split(".")[2] for p in inputs.parents] == [str(s) for s in range(12)]
    assert inputs.other_hints == ["alpha", "zeta"]
