"""Issue 41: the plan holds when observations restate the game's history, and every author, hardening slot and
pair is served at once (tests/helpers/restating_provider.py serves both over real HTTP)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from tests.helpers.restating_provider import most_at_once, registry_text, restating_provider

ENVDUELS = shutil.which("envduels", path=str(Path(sys.executable).parent)) or str(Path(sys.executable).parent / "envduels")


def test_each_call_gets_its_share_of_the_episode_prompt_by_what_it_was_sent():
    from envduels_dagster.core.requests.turns import per_call_prompts

    transcript = [{"role": "system", "content": "s" * 36}, {"role": "user", "content": "o" * 40},
                  {"role": "assistant", "content": "a" * 8}, {"role": "user", "content": "o" * 120},
                  {"role": "assistant", "content": "a" * 8}]
    # call 0 was sent system + first observation (9+4 + 10+4 = 27), call 1 that plus a reply and an observation (+6 +34)
    shares = per_call_prompts(transcript, 2, 1000.0)
    assert shares == pytest.approx([1000 * 27 / 94, 1000 * 67 / 94])
    assert per_call_prompts(transcript, 3, 1000.0) is None  # a transcript short of its calls is not read
    assert per_call_prompts([], 1, 10.0) is None


def test_the_table_is_measured_where_measured_and_carried_on_at_its_tail_slope_beyond():
    from envduels_dagster.core.requests.turns import TurnTable, planned_prompt, quantiles

    table = TurnTable((100.0, 150.0, 250.0, 400.0), (9, 9, 5, 2), 9)
    assert table.episode_prompt(2) == 250.0 and table.episode_prompt(2.5) == 250.0 + 125.0
    assert table.slope() == pytest.approx(100.0)  # least squares over 100, 150, 250, 400
    assert table.prompt_at(5) == pytest.approx(600.0)  # extrapolated only beyond turn 4
    assert TurnTable((50.0, 40.0), (3, 1), 3).prompt_at(4) == 40.0  # never below the last measured turn
    # an environment is charged the mean over the fills, not the prompt of the mean length (prompts grow)
    assert planned_prompt(table, (0.25, 0.75), 4) == pytest.approx((100 + 500) / 2)
    assert planned_prompt(table, (0.5,), 4) < planned_prompt(table, (0.25, 0.75), 4)
    assert quantiles([0.3, 0.1, 0.2]) == (0.1, 0.2, 0.3) and len(quantiles([i / 100 for i in range(100)])) == 20


def _env(home: Path, registry: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVDUELS_", "DAGSTER_"))}
    return {**env, "ENVDUELS_HOME": str(home), "ENVDUELS_REGISTRY": str(registry), **extra}


@pytest.mark.slow  # a pilot, the demo's whole pipeline and the comparison over HTTP: ~1-2 min on 2 shared cores
def test_the_plan_after_the_pilot_holds_when_observations_restate_the_history(tmp_path):
    """Issue 41: observations that restate the game (every reply so far) make an episode's prompt grow faster
    than any fixed law; the plan after `envduels plan --pilot --yes` charges play from the prompts measured
    turn by turn, and after the run `envduels plan --compare` is within 10% in tokens and dollars per model."""
    with restating_provider() as (base, bodies):
        registry = tmp_path / "models.yaml"
        registry.write_text(registry_text(base))
        env = _env(tmp_path / "home", registry, ENVDUELS_ENVS_PER_AUTHOR="3", ENVDUELS_SEEDS="3", ENVDUELS_ROUNDS="0",
                   ENVDUELS_AUTHOR_DUPLICATE_THRESHOLD="off")  # one game template, its lengths vary by slot
        outs = []
        for command in (["plan", "--pilot", "--yes"], ["demo"], ["plan", "--compare", "--json"]):
            outs.append(subprocess.run([ENVDUELS, *command], env=env, capture_output=True, text=True, timeout=900))
            assert outs[-1].returncode == 0, (command, outs[-1].stderr[-3000:])
    pilot, demo, compare = outs
    # the in-process run called both remote authors at once, then its author runs read the calls from the cache
    assert "[round 0] 2 authors called at once (" in demo.stdout, demo.stdout
    with duckdb.connect(str(tmp_path / "home" / "warehouse.duckdb"), read_only=True) as conn:
        # what makes this test: the learner's observations grow with the game, so its late calls cost far more
        short, long = conn.execute("""SELECT avg(prompt_tokens / model_calls) FILTER (WHERE model_calls <= 3),
                                             avg(prompt_tokens / model_calls) FILTER (WHERE model_calls >= 16)
                                      FROM episodes""").fetchone()
        assert long > 3 * short, (short, long)
    rows = {r["model"]: r for r in json.loads(compare.stdout)["rows"]}
    assert set(rows) == {"a1", "a2", "learner", "total"}
    for model, r in rows.items():
        assert r["actual_tokens"] > 0, r
        assert abs(r["plan_tokens"] - r["actual_tokens"]) <= 0.10 * r["actual_tokens"], (model, r, pilot.stdout)
        assert abs(r["plan_usd"] - r["actual_usd"]) <= 0.10 * r["actual_usd"], (model, r, pilot.stdout)
    # each rate says where it came from: the learner's prompts turn by turn and its call times, from the pilot
    assert "learner pilot-measured (" in pilot.stdout and "prompt by turn, turns 1-" in pilot.stdout, pilot.stdout


def _pilot_wall(base: str, tmp_path: Path, authors: tuple[str, ...]) -> float:
    """Seconds the pilot's authoring takes for ``authors`` (one environment each, no pairs) over real HTTP."""
    from envduels_dagster.core.models import Gateway
    from envduels_dagster.core.models.registry import load_registry
    from envduels_dagster.core.requests.pilot import PilotConfig, run_pilot

    path = tmp_path / f"models-{len(authors)}.yaml"
    path.write_text(registry_text(base, authors))
    gateway = Gateway(load_registry(path))

    async def go():
        try:
            with duckdb.connect(str(tmp_path / f"pilot-{len(authors)}.duckdb")) as conn:
                t0 = time.perf_counter()
                await run_pilot(gateway, PilotConfig(tuple(authors), (), 1, (0, 1)), conn)
                return time.perf_counter() - t0, conn.execute("SELECT count(*) FROM environments WHERE valid").fetchone()
        finally:
            await gateway.aclose()

    wall, (valid,) = asyncio.run(go())
    assert valid == len(authors)
    return wall


@pytest.mark.slow  # 2 s authoring calls over HTTP: ~6 s
def test_the_pilot_authors_every_author_at_once(tmp_path):
    """3 authors at 2 s an authoring call take about one author's wall time, not three (the sum: ratio 3)."""
    with restating_provider(author_latency_s=2.0) as (base, bodies):
        (tmp_path / "warm").mkdir()
        _pilot_wall(base, tmp_path / "warm", ("a1",))  # the first call pays the client's and sandbox's start-up
        bodies.clear()
        one = _pilot_wall(base, tmp_path, ("a1",))
        del bodies[:]
        three = _pilot_wall(base, tmp_path, ("a1", "a2", "a3"))
    assert len(bodies) == 3 and most_at_once(bodies) == 3  # the server answered the three together
    assert three / one < 1.6, (one, three)


@pytest.mark.slow  # 2 s hardening calls over HTTP: ~6 s
def test_a_hardening_round_hardens_every_slot_at_once(tmp_path):
    """An author's 3 parents at 2 s a hardening call: about one call's wall time, not three; children in slot order."""
    from envduels_dagster.core.authoring.hardening import HardeningInputs, harden_author
    from envduels_dagster.core.authoring.prompts import spec_from_reply
    from envduels_dagster.core.models import Gateway
    from envduels_dagster.core.models.registry import load_registry
    from envduels_dagster.core.storage.warehouse import episodes_frame
    from tests.helpers.restating_provider import authoring_reply

    parents = [spec_from_reply("a1", slot, authoring_reply(f"slot {slot}"), [0, 1], 0) for slot in range(3)]
    no_play = episodes_frame([], {}, "v", None)  # nobody played the parents: no failure excerpts
    with restating_provider(author_latency_s=2.0) as (base, bodies):
        path = tmp_path / "models.yaml"
        path.write_text(registry_text(base, ("a1",)))
        walls, children = [], []
        for n in (1, 1, 3):  # the first pays the client's and sandbox's start-up
            gateway = Gateway(load_registry(path))

            async def go(n=n, gateway=gateway):
                try:
                    t0 = time.perf_counter()
                    out = await harden_author(gateway, "a1", 1, HardeningInputs(parents[:n], no_play, []), 2000, None)
                    return time.perf_counter() - t0, out
                finally:
                    await gateway.aclose()

            del bodies[:]
            wall, out = asyncio.run(go())
            walls.append(wall)
            children.append(out)
    assert most_at_once(bodies) == 3  # the last round's three slots were answered together
    assert len(bodies) == 3 and [c.env_id.split(".")[2] for c in children[2]] == ["0", "1", "2"]
    assert all(c.author_calls == 1 for c in children[2])
    assert walls[2] / walls[1] < 1.6, walls
