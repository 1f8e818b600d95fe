"""Episodes a person can read: `envduels show` prints cold and hinted play of the same seed side by side."""

from __future__ import annotations

import json

import duckdb
import pandas as pd
import pytest

from envduels_dagster.cli import main
from envduels_dagster.core.play.transcripts import episodes_html, load, side_by_side_text, turns
from envduels_dagster.core.storage.warehouse import replace_rows

SYSTEM = {"role": "system", "content": "You play a game."}


def chat(*pairs: tuple[str, str]) -> str:
    messages = [SYSTEM]
    for obs, act in pairs:
        messages.append({"role": "user", "content": obs})
        if act:
            messages.append({"role": "assistant", "content": act})
    return json.dumps(messages)


def episode(condition, seed, status, transcript, solver="novice"):
    return {"env_id": "expert.r0.1", "author": "expert", "solver": solver, "round": 0, "condition": condition,
            "seed": seed, "status": status, "stop_reason": "terminated" if status == "success" else "max_turns",
            "turns": transcript.count('"assistant"'), "final_reward": 1.0 if status == "success" else 0.0,
            "transcript": transcript, "is_self_pair": False, "model_calls": 2}


EPISODES = [
    episode("cold", 0, "failure", chat(("Guess 1-100 (seed 0)", "\\boxed{50}"), ("higher", "\\boxed{75}"))),
    episode("hinted", 0, "success", chat(("Guess 1-100 (seed 0)\nHint: it is prime and > 90", "\\boxed{97}"))),
    episode("cold", 1, "success", chat(("Guess 1-100 (seed 1)", "\\boxed{13}"))),
    episode("hinted", 1, "success", chat(("Guess 1-100 (seed 1)\nHint: unlucky", "\\boxed{13}"))),
    episode("cold", 0, "success", chat(("Guess 1-100 (seed 0)", "\\boxed{97}")), solver="oracle"),
    episode("hinted", 0, "success", chat(("Guess 1-100 (seed 0)\nHint: prime", "\\boxed{97}")), solver="oracle"),
]
ENV = {"env_id": "expert.r0.1", "author": "expert", "round": 0, "domain": "search", "class_name": "Guess",
       "max_turns": 5, "source": "x", "source_sha256": "0" * 64, "hint": "it is prime and > 90",
       "benchmark_seeds": [0, 1], "valid": True}


@pytest.fixture
def home_with_episodes(envduels_home):
    envduels_home.mkdir(parents=True)
    with duckdb.connect(str(envduels_home / "warehouse.duckdb")) as conn:
        replace_rows(conn, "environments", pd.DataFrame([ENV]))
        replace_rows(conn, "episodes", pd.DataFrame(EPISODES))
    return envduels_home


def test_turns_pair_each_observation_with_the_action_that_answered_it():
    t = turns(chat(("obs 1", "act 1"), ("obs 2", "act 2"), ("final obs", "")))
    assert [(x.observation, x.action) for x in t] == [("obs 1", "act 1"), ("obs 2", "act 2"), ("final obs", "")]
    assert turns(None) == [] and turns("[]") == []


def test_cold_and_hinted_turns_of_the_same_seed_appear_side_by_side(home_with_episodes, capsys):
    assert main(["show", "expert.r0.1", "--solver", "novice", "--width", "100"]) == 0
    out = capsys.readouterr().out
    assert "expert.r0.1 (author expert, round 0) played by novice, seed 0" in out
    assert "hint given to the hinted side:" in out and "it is prime and > 90" in out
    lines = out.splitlines()
    outcome = next(line for line in lines if line.startswith("COLD: failure"))
    assert "| HINTED: success, terminated, 1 turns" in outcome
    # the first turn: the cold action and the hinted action on the same line, in their columns
    first = next(line for line in lines if "act: \\boxed{50}" in line)
    assert first.index("act: \\boxed{50}") < first.index("| ") and "\\boxed{97}" not in first
    hinted_first = [line for line in lines if "act: \\boxed{97}" in line]
    assert hinted_first and hinted_first[0].index("act: \\boxed{97}") > hinted_first[0].index("| ")
    assert out.count("played by novice") == 2 and "oracle" not in out  # seeds 0 and 1, one solver


def test_a_pair_shows_every_environment_and_seed_of_that_pair(home_with_episodes, capsys):
    assert main(["show", "expert|oracle"]) == 0
    out = capsys.readouterr().out
    assert out.count("played by oracle, seed 0") == 1 and "played by novice" not in out


def test_json_gives_one_object_per_episode_with_its_transcript(home_with_episodes, capsys):
    assert main(["show", "expert.r0.1", "--solver", "novice", "--seed", "0", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["condition"], r["seed"]) for r in rows] == [("cold", 0), ("hinted", 0)]
    assert rows[1]["transcript"][1]["content"].endswith("> 90")


@pytest.mark.parametrize("argv, message", [
    (["show", "nope.r0.9"], "no episodes for environment 'nope.r0.9'; environment ids look like: expert.r0.1"),
    (["show", "expert.r0.1", "--solver", "ghost"], "no episodes of 'expert.r0.1' for solver 'ghost'; its "
                                                   "solvers: novice, oracle"),
    (["show", "expert|ghost"], "no episodes for pair 'expert|ghost'; pairs with episodes include: expert|novice"),
])
def test_an_unknown_target_says_what_exists_exits_2_and_changes_nothing(home_with_episodes, capsys, argv, message):
    before = (home_with_episodes / "warehouse.duckdb").read_bytes()
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert (home_with_episodes / "warehouse.duckdb").read_bytes() == before


def test_no_warehouse_says_where_it_looked(envduels_home, capsys):
    assert main(["show", "expert.r0.1"]) == 2
    err = capsys.readouterr().err
    assert f"no warehouse at {envduels_home / 'warehouse.duckdb'}" in err and "ENVDUELS_HOME" in err
    assert not (envduels_home / "warehouse.duckdb").exists()  # nothing created


def test_the_episode_page_puts_cold_and_hinted_in_two_columns(home_with_episodes):
    with duckdb.connect(str(home_with_episodes / "warehouse.duckdb"), read_only=True) as conn:
        envs, eps = load(conn, "expert|novice")
    html = episodes_html("Episodes: expert -> novice", envs, eps)
    assert html.count('<section class="episode"') == 2 and html.count('<td class="cold">') == 2
    assert "<script" not in html and "it is prime and &gt; 90" in html
    assert side_by_side_text(envs, eps).count("COLD:") == 2
