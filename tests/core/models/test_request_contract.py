"""The request contract: simulated models act on the typed request, never on the prompt's wording;
real providers receive exactly the messages (checked over real HTTP); cache keys are unchanged."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pandas as pd
import pytest
from aiohttp import web

from envduels_dagster.core.authoring.coevolution import build_digest_messages
from envduels_dagster.core.authoring.prompts import author_messages, author_messages_v1, parse_author_reply
from envduels_dagster.core.models import AuthorRequest, Gateway, HardenRequest, PeerRates, Prompt, SolveRequest
from envduels_dagster.core.models.call_cache import request_key
from envduels_dagster.core.models.contract import WIRE_FIELD, from_wire, to_wire
from envduels_dagster.core.models.registry import load_registry
from envduels_dagster.core.protocol import EnvironmentSpec, parse_boxed
from envduels_dagster.sim.model import SimulatedModel
from envduels_dagster.sim.profiles import PROFILES
from envduels_dagster.sim.server import ServerConfig, SimServer

# A careful author/solver: no defects, no slips, always its best move (outcomes depend on data only).
CAREFUL = dataclasses.replace(PROFILES["journeyman"], sloppiness=0.0, slip=0.0, precision=1.0, hint_use=1.0)
REWORDED_SYSTEM = "Please act as a designer of small text games for evaluating agents."
GUESS_INTRO = "I am thinking of an integer between 1 and 95. Guess it; I will say too low or too high."
HINT = "The secret is always a multiple of 10."


def reworded(prompt: Prompt, user: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": REWORDED_SYSTEM}, {"role": "user", "content": user}]


def test_authoring_dispatch_and_slot_come_from_the_request_not_the_wording():
    model = SimulatedModel(CAREFUL)
    for slot in range(4):
        prompt = author_messages(slot, 4)
        today = parse_author_reply(model.respond(list(prompt), slot, prompt.request))
        other = parse_author_reply(model.respond(reworded(prompt, "Make me a game, number whatever."), slot,
                                                 prompt.request))
        family = CAREFUL.families[slot % len(CAREFUL.families)]
        assert today.family == other.family == family
        assert today.class_name == other.class_name == f"{family.capitalize()}Journeyman{slot}"


def test_hardening_rule_reads_peer_rates_and_verdict_from_the_request():
    model = SimulatedModel(CAREFUL)
    meta = {"family": "maze", "difficulty": 0.5, "hint": "The exit is always in the bottom-right corner."}
    base = dict(slot=2, round=1, parent_env_id="journeyman.r0.2.deadbeef", parent_meta=meta, parent_valid=True,
                seeds=(0, 1, 2, 3))
    words = [{"role": "system", "content": "x"}, {"role": "user", "content": "Improve it, or not. Up to you."}]
    keep = model.respond(words, 1, HardenRequest(**base, peer_rates=(PeerRates(solver="a", cold=0.25, hinted=0.75),)))
    assert json.loads(keep.strip("`json\n")) == {
        "keep": True, "reason": "the panel fails it cold (0.25) and passes it hinted (0.75)"}
    harder = parse_author_reply(model.respond(words, 1, HardenRequest(
        **base, peer_rates=(PeerRates(solver="a", cold=1.0, hinted=1.0),))))
    assert harder.family == "maze" and harder.meta["difficulty"] == round(0.5 + 0.35 * CAREFUL.feedback_gain, 3)
    rejected = parse_author_reply(model.respond(words, 1, HardenRequest(**{**base, "parent_valid": False},
                                                                        reject_reason="no reference")))
    assert rejected.family == "maze" and rejected.meta["difficulty"] == 0.5  # same family, same difficulty
    nobody = model.respond(words, 1, HardenRequest(**base))
    assert '"keep": true' in nobody and "nobody played it yet" in nobody


def test_the_digest_request_carries_exactly_the_rates_the_table_shows():
    parent = EnvironmentSpec(env_id="e.r0.0.x", author="e", class_name="C", max_turns=5, source="class C: ...\n",
                             hint="h", valid=True, author_meta={"family": "guess", "difficulty": 0.4})
    rows = [("a", "cold", "failure"), ("a", "hinted", "success"), ("a", "cold", "success"), ("a", "hinted", "success"),
            ("b", "cold", "failure")]  # b has no hinted result: the table shows nan, the request leaves b out
    eps = pd.DataFrame([{"solver": s, "condition": c, "status": st, "seed": i, "transcript": "[]"}
                        for i, (s, c, st) in enumerate(rows)])
    prompt = build_digest_messages(parent, eps, 1, 0, 300, [])
    assert "- a: cold 0.50, hinted 1.00" in prompt[1]["content"] and "- b: cold 0.00, hinted nan" in prompt[1]["content"]
    assert prompt.request.peer_rates == (PeerRates(solver="a", cold=0.5, hinted=1.0),)
    assert prompt.request.parent_meta["family"] == "guess" and prompt.request.parent_valid


def test_solver_reads_hint_and_first_observation_from_the_request():
    model = SimulatedModel(CAREFUL)
    request = SolveRequest(env_id="e", condition="hinted", observation=GUESS_INTRO, hint=HINT, max_turns=6)
    today = [{"role": "system", "content": "play"}, {"role": "user", "content": f"Hint: {HINT}\n\nObservation: {GUESS_INTRO}"}]
    other = [{"role": "system", "content": "play"}, {"role": "user", "content": f"You know this: {HINT} Now: {GUESS_INTRO}"}]
    # with the hint the candidates are 10..90 (middle 50); without it 1..95 (middle 48)
    assert parse_boxed(model.respond(today, 0, request)) == parse_boxed(model.respond(other, 0, request)) == "50"
    cold = request.model_copy(update={"condition": "cold", "hint": None})
    assert parse_boxed(model.respond(today, 0, cold)) == "48"
    # no request (a plain OpenAI client): the conversation is played, the wording is not parsed for a hint
    assert parse_boxed(model.respond(today, 0, None)) == "48"


def test_cache_keys_and_prompt_text_are_unchanged():
    """Golden keys computed with the code before the contract existed (same registry fields).

    The authoring key changed twice on purpose since: the brief quotes the sandbox's
    ALLOWED_MODULES_SENTENCE (issue 21; effect on the demo in docs/DECISIONS.md), and prompt version 2
    (issue 31), whose version-1 messages, still what the simulated authors seed from, keep the old key; and
    prompt version 3 (issue 42: the slot line no longer names the batch size).
    The digest's did not change."""
    def key(msgs, seed):
        return request_key({"model": "envduels-sim/expert", "api_base": None, "version": "1", "temperature": 0.0,
                            "max_tokens": 1024, "seed": seed, "messages": msgs})

    prompt = author_messages(2, 6)
    assert key(author_messages_v1(prompt.request), 2) == (
        "ae4f8380dd24b6076e1e577ff745f0a22760f70f33f1a96da84da9d79652576a")
    assert key(prompt, 2) == key(list(prompt), 2) == "00d649ba3db82c9e4e39dfee20a146645506c664ab9eb08cb2e58912baa2fb5e"
    parent = EnvironmentSpec(env_id="expert.r0.1.abcd", author="expert", class_name="C", max_turns=5,
                             source="class C: pass\n", hint="h", valid=True,
                             author_meta={"family": "maze", "difficulty": 0.7})
    eps = pd.DataFrame([{"solver": "novice", "condition": c, "status": s, "seed": i, "transcript": "[]"}
                        for i, (c, s) in enumerate([("cold", "failure"), ("hinted", "success")])])
    digest = build_digest_messages(parent, eps, 1, 1, 300, [])
    assert key(list(digest), 1001) == "00819416807a92417d0d33855e723cec666e64a0b58ab3429af653469a387b40"


def test_wire_form_round_trips_and_rejects_bad_input():
    for req in (AuthorRequest(slot=1, count=3, domain="d", seeds=(0, 1)),
                SolveRequest(env_id="e", condition="cold", observation="o", max_turns=3),
                HardenRequest(slot=0, round=1, parent_env_id="p", parent_meta={"a": [1]}, parent_valid=True,
                              seeds=(0,), peer_rates=(PeerRates(solver="s", cold=0.5, hinted=1.0),))):
        assert from_wire(json.loads(json.dumps(to_wire(req)))) == req
    with pytest.raises(ValueError, match="kind"):
        from_wire({"kind": "dance", "slot": 1})
    with pytest.raises(ValueError, match="slot"):
        from_wire({"kind": "author", "count": 3, "domain": "d", "seeds": [0]})


# --------------------------------------------------------------------------- over real HTTP


class Recorder:
    """A tiny OpenAI-compatible provider that records every request body it receives."""

    def __init__(self):
        self.bodies: list[dict] = []

    async def chat(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.json())
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": "\\boxed{1}"}}],
                                  "usage": {"prompt_tokens": 5, "completion_tokens": 2}})


async def serve(app: web.Application):
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"


def registry_for(tmp_path, base: str, client: str, contract: bool, model: str = "openai/journeyman"):
    path = tmp_path / f"models-{client}-{contract}.yaml"
    path.write_text(f"models:\n  - name: m\n    model: {model}\n    api_base: {base}\n    client: {client}\n"
                    f"    request_contract: {str(contract).lower()}\n")
    return load_registry(path)


SOLVE = SolveRequest(env_id="e", condition="hinted", observation=GUESS_INTRO, hint=HINT, max_turns=6)
SOLVE_MESSAGES = [{"role": "system", "content": "play"},
                  {"role": "user", "content": f"Hint: {HINT}\n\nObservation: {GUESS_INTRO}"}]


@pytest.mark.slow  # about a second or more (--durations, 1 Dec 2026): kept out of the inner loop
@pytest.mark.parametrize("client", ["fast", "litellm", "litellm-full"])
def test_real_providers_receive_exactly_todays_messages(client, tmp_path):
    recorder = Recorder()

    async def main():
        app = web.Application()
        app.router.add_post("/v1/chat/completions", recorder.chat)
        runner, base = await serve(app)
        gateway = Gateway(registry_for(tmp_path, base, client, contract=False))
        try:
            await gateway.chat("m", author_messages(1, 3), seed=1)
            await gateway.chat("m", SOLVE_MESSAGES, seed=2, request=SOLVE)
        finally:
            await gateway.aclose()
            await runner.cleanup()

    asyncio.run(main())
    assert [b["messages"] for b in recorder.bodies] == [list(author_messages(1, 3)), SOLVE_MESSAGES]
    for body, seed in zip(recorder.bodies, (1, 2)):
        assert WIRE_FIELD not in body and not any("envduels" in k for k in body)
        assert body["model"] == "journeyman" and body["seed"] == seed and body["temperature"] == 0.0
        assert body["max_tokens"] == 1024


@pytest.mark.parametrize("client", ["fast", "litellm", "litellm-full"])
def test_a_declared_serve_sim_endpoint_gets_the_request_and_answers_like_in_process(client, tmp_path):
    server = SimServer(ServerConfig())
    seen: list[dict] = []

    @web.middleware
    async def record(request, handler):
        seen.append(await request.json())
        return await handler(request)

    async def main():
        app = server.app()
        app.middlewares.append(record)
        runner, base = await serve(app)
        gateway = Gateway(registry_for(tmp_path, base, client, contract=True))
        try:
            authored = await gateway.chat("m", author_messages(1, 3), seed=1)
            solved = await gateway.chat("m", SOLVE_MESSAGES, seed=2, request=SOLVE)
        finally:
            await gateway.aclose()
            await runner.cleanup()
        return authored.text, solved.text

    authored, solved = asyncio.run(main())
    local = SimulatedModel("journeyman")
    prompt = author_messages(1, 3)
    assert authored == local.respond(list(prompt), 1, prompt.request)
    assert solved == local.respond(SOLVE_MESSAGES, 2, SOLVE)
    assert [from_wire(b[WIRE_FIELD]) for b in seen] == [prompt.request, SOLVE]
    assert [b["messages"] for b in seen] == [list(prompt), SOLVE_MESSAGES]  # the messages are untouched


def test_serve_sim_rejects_a_malformed_request_field_naming_it():
    server = SimServer(ServerConfig())

    async def main():
        import aiohttp

        runner, base = await serve(server.app())
        try:
            async with aiohttp.ClientSession() as session:
                body = {"model": "novice", "messages": SOLVE_MESSAGES, WIRE_FIELD: {"kind": "solve", "env_id": "e"}}
                async with session.post(base + "/chat/completions", json=body) as resp:
                    return resp.status, await resp.json()
        finally:
            await runner.cleanup()

    status, body = asyncio.run(main())
    assert status == 400
    assert WIRE_FIELD in body["error"]["message"] and "observation" in body["error"]["message"]
    assert server.stats["requests"] == 1


def test_request_contract_needs_an_api_base(tmp_path):
    from envduels_dagster.core.models.registry import RegistryError

    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - name: m\n    model: openai/x\n    request_contract: true\n")
    with pytest.raises(RegistryError, match="entry #1 \\('m'\\).*request_contract is for envduels serve-sim"):
        load_registry(path)


def test_the_hardening_request_is_scrubbed_of_other_authors_hints_like_the_brief():
    from envduels_dagster.core.authoring.coevolution import REDACTED

    secret = "Another author's secret: the exit is in the middle."
    parent = EnvironmentSpec(env_id="e.r0.0.x", author="e", class_name="C", max_turns=5, source="class C: ...\n",
                             hint=secret, valid=False, reject_reason=f"hint leaks: {secret}",
                             author_meta={"family": "maze", "note": secret})
    eps = pd.DataFrame(columns=["solver", "condition", "status", "seed", "transcript"])
    prompt = build_digest_messages(parent, eps, 1, 0, 300, [secret])
    assert secret not in prompt[1]["content"]
    assert secret not in json.dumps(to_wire(prompt.request))
    assert prompt.request.parent_meta["hint"] == REDACTED and prompt.request.parent_meta["family"] == "maze"
    assert prompt.request.reject_reason == f"hint leaks: {REDACTED}"
