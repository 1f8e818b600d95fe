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
    assert main(["show", "expert.r0.1", "--solver", "novice", "--width", "100", "--transcripts"]) == 0
    out = capsys.readouterr().out
    assert "expert.r0.1 (author expert, round 0) played by novice, seed 0" in out
    assert "hint given to the hinted side:" in out and "it is prime and > 90" in out
    lines = out.splitlines()
    outcome = next(line for line in lines if line.startswith("COLD: failure"))
    assert "| HINTED: success, ended by the environment, 1 turn" in outcome and "1 turns" not in out
    # the first turn: the cold action and the hinted action on the same line, in their columns
    first = next(line for line in lines if "act: \\boxed{50}" in line)
    assert first.index("act: \\boxed{50}") < first.index("| ") and "\\boxed{97}" not in first
    hinted_first = [line for line in lines if "act: \\boxed{97}" in line]
    assert hinted_first and hinted_first[0].index("act: \\boxed{97}") > hinted_first[0].index("| ")
    assert out.count("played by novice") == 2 and "oracle" not in out  # seeds 0 and 1, one solver


def test_a_pair_shows_every_environment_and_seed_of_that_pair(home_with_episodes, capsys):
    assert main(["show", "expert|oracle", "--transcripts"]) == 0
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
    assert html.count('<details class="episode"') == 2 and html.count('<td class="cold">') == 2
    assert "<script" not in html and "it is prime and &gt; 90" in html
    assert side_by_side_text(envs, eps).count("COLD:") == 2


def test_show_prints_a_summary_table_first_and_transcripts_only_on_request(home_with_episodes, capsys):
    assert main(["show", "expert|novice"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["round", "environment", "solver", "seed", "condition", "outcome", "stop", "turns",
                                "reward"]
    assert lines[1].split()[:6] == ["0", "expert.r0.1", "novice", "0", "cold", "failure"]
    assert "turn limit" in lines[1] and "4 episodes of 1 environment: cold 1/2 successes, hinted 2/2 successes" in out
    assert "obs:" not in out and "--transcripts" in out  # no transcript unless asked
    assert main(["show", "expert|novice", "--round", "1"]) == 2
    assert "no episodes for pair 'expert|novice'" in capsys.readouterr().err


def test_the_episode_index_links_every_episode_to_its_collapsed_transcript_with_rewards():
    from envduels_dagster.core.play.episode import episode_trailer

    cold = episode("cold", 0, "failure", json.dumps(json.loads(chat(("Guess (seed 0)", "\\boxed{50}"), ("higher", "\\boxed{75}")))
                                                + [episode_trailer([0.0, 0.25], "")]))
    hinted = episode("hinted", 0, "success", json.dumps(json.loads(chat(("Guess (seed 0)\nHint: 97", "\\boxed{97}")))
                                                     + [episode_trailer([1.0], "Correct: 97 in 1 guess.")]))
    eps = pd.DataFrame([cold, hinted])
    assert [t.reward for t in turns(hinted["transcript"])] == [1.0, None]
    assert turns(hinted["transcript"])[-1].observation == "Correct: 97 in 1 guess."
    html = episodes_html("t", pd.DataFrame([ENV]), eps, back="../index.html")
    index = html[html.index('<table id="index"'):html.index("</table>")]
    assert index.count("<tr class=") == 2 and '<tr class="failure"' in index and '<tr class="success"' in index
    assert index.count('href="#ep-expert.r0.1-s0"') == 2 and html.count('id="ep-expert.r0.1-s0"') == 1
    details = html[html.index('<details class="episode"'):]
    assert details.index("reward 0") < details.index("reward 0.25") and "reward 1<" in details
    assert "final observation" in details and "Correct: 97 in 1 guess." in details
    assert '<div class="transcript" id="ep-expert.r0.1-s0">' in details and "<details open" not in html
    assert 'href="../index.html"' in html and "<script" not in html


def test_a_played_episode_records_each_steps_reward_and_the_final_observation_outside_the_chat():
    """The trailer is after the last message the model saw: nothing sent changes, the viewer gets the rewards."""
    import asyncio
    import tempfile
    from pathlib import Path

    from envduels_dagster.core.models.gateway import Gateway
    from envduels_dagster.core.models.registry import load_registry
    from envduels_dagster.core.play.episode import TRAILER_ROLE, play_episode
    from envduels_dagster.core.protocol import EnvironmentSpec
    from tests.helpers.pipeline import write_registry

    source = (
        "class Count:\n"
        "    def reset(self, seed):\n        self.n = 0\n        return 'say 1, then 2', {}\n"
        "    def step(self, action):\n        self.n += 1\n"
        "        return f'step {self.n} done', 0.5 * self.n, self.n >= 2, False, {}\n"
        "    def reference_actions(self, seed):\n        return ['1', '2']\n")
    with tempfile.TemporaryDirectory() as tmp:
        registry = load_registry(write_registry(Path(tmp) / "models.yaml", ["oracle"]))
        env = EnvironmentSpec(env_id="t.r0.1", author="t", domain="count", class_name="Count", max_turns=4,
                              source=source, hint="1 then 2")
        rec = asyncio.run(play_episode(Gateway(registry), "oracle", env, 0, "cold"))
    assert rec.transcript[-1]["role"] == TRAILER_ROLE
    assert all(m["role"] != TRAILER_ROLE for m in rec.transcript[:-1])
    t = turns(rec.transcript)
    assert [x.reward for x in t if x.action] == json.loads(rec.transcript[-1]["rewards"])
    if rec.stop_reason == "terminated":
        assert t[-1].observation == rec.transcript[-1]["content"] and t[-1].action == ""
