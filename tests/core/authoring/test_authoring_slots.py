"""Authoring slots that differ (issue 31): each slot its own brief, later waves see the earlier designs, a
near-copy within an author is rejected as "duplicate of <env_id>", bad settings are refused with their
reason (tests/assets/authoring/test_authoring_duplicates.py: the same through the asset and the warehouse). The provider is a real OpenAI-compatible HTTP server answering with real model
replies (tests/reply_corpus/authoring-v1/), reached through the gateway's lean HTTP client."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from envduels_dagster.core.authoring.plan import (
    DEFAULT_DOMAIN_FAMILIES,
    AuthoringPlan,
    AuthoringPlanError,
    parse_families,
    parse_threshold,
    parse_wave_size,
)
from envduels_dagster.core.authoring.prompts import author_environments, author_messages, author_messages_v1
from envduels_dagster.core.models import Gateway, run_and_close
from envduels_dagster.core.models.registry import load_registry
from envduels_dagster.sim.model import SimulatedModel
from tests.helpers.fixed_provider import SEEDS, http_registry, provider, real_reply


def brief_of(user: str) -> str:
    return re.search(r"^Domain brief: (.*)$", user, re.M).group(1)


def test_the_default_plan_gives_each_of_ten_slots_its_own_domain_family():
    plan = AuthoringPlan()
    users = [author_messages(slot, 10, family=plan.family(slot))[1]["content"] for slot in range(10)]
    assert [brief_of(u) for u in users] == list(DEFAULT_DOMAIN_FAMILIES)
    assert len(set(users)) == 10
    assert [list(w) for w in plan.waves(10)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    # a caller's own brief keeps the family beside it
    assert brief_of(author_messages(1, 3, "held-out variants", family="logic puzzles")[1]["content"]) == (
        "held-out variants (family for this slot: logic puzzles)")


def test_each_slot_gets_its_own_brief_later_waves_see_the_earlier_designs_and_a_copy_is_rejected(tmp_path):
    """Three families, waves of two, four slots: slot 3 cycles back to slot 0's family, and the provider
    (a real model's replies, chosen by the brief) writes slot 0's environment again."""
    families = ("logic puzzles", "search with an unreliable oracle", "hidden-rule inference")
    by_family = {families[0]: real_reply(4), families[1]: real_reply(0), families[2]: real_reply(7)}
    plan = AuthoringPlan(families=families, duplicate_threshold=0.9, wave_size=2)
    with provider(lambda user: by_family[brief_of(user)]) as (base, bodies):
        gateway = Gateway(load_registry(http_registry(tmp_path, base)))
        specs = asyncio.run(run_and_close(gateway, author_environments(gateway, "real", 4, SEEDS, plan=plan)))
    users = {int(re.search(r"Environment slot: (\d+)\n", b["messages"][-1]["content"]).group(1)):
             b["messages"][-1]["content"] for b in bodies}
    assert sorted(users) == [0, 1, 2, 3] and len(set(users.values())) == 4
    assert [brief_of(users[k]) for k in range(4)] == [*families, families[0]]
    assert all("You already wrote" not in users[k] for k in (0, 1))
    for k in (2, 3):  # the second wave is shown the first wave's valid designs, by title
        assert "Do not repeat these designs" in users[k]
        assert "- CounterfeitCoinEnv (logic puzzles)\n" in users[k]
        assert "- SonarHuntEnv (naval sonar search (binary search against a systematically unreliable oracle))\n" \
            in users[k]
        assert "EleusisEnv" not in users[k]  # slot 2 is in the same wave as slot 3
    assert all("envduels" not in json.dumps(b) for b in bodies)  # a real provider gets the messages only
    assert [(s.class_name, s.valid) for s in specs] == [("CounterfeitCoinEnv", True), ("SonarHuntEnv", True),
                                                        ("EleusisEnv", True), ("CounterfeitCoinEnv", False)]
    assert specs[3].reject_reason == f"duplicate of {specs[0].env_id} (AST similarity 1.00)"
    assert specs[3].winnability == "unproven"  # rejected before the sandbox spent time on it
    assert {s.prompt_version for s in specs} == {"author-v3"}
    assert [s.author_calls for s in specs] == [1, 1, 1, 1]  # the duplicate's call is paid for and counted


def test_simulated_authors_keep_their_draws_and_are_exempt_from_the_duplicate_check(sim_registry, tmp_path):
    """The sim seeds an authoring reply from the version-1 messages of its request, so the new wording,
    family and earlier designs change nothing it writes; and its slots K and K+4 (the same family template)
    both count, as its documented results assume."""
    model = SimulatedModel("journeyman")
    for slot in range(6):
        today = author_messages(slot, 6, family="logic puzzles", earlier=("A (x)", "B (y)"))
        v1 = author_messages_v1(today.request)
        assert model.respond(list(today), slot, today.request) == model.respond(v1, slot, today.request)
    gateway = Gateway(load_registry(sim_registry(["oracle"])))
    specs = asyncio.run(run_and_close(gateway, author_environments(gateway, "oracle", 6, SEEDS)))
    assert not [s.reject_reason for s in specs if s.reject_reason and s.reject_reason.startswith("duplicate")]
    assert specs[0].family == specs[4].family and specs[0].valid and specs[4].valid


@pytest.mark.parametrize(("parse", "text", "why"), [
    (parse_families, " ; ;\n", "at least one domain family is needed (separate families with ';')"),
    (parse_families, "logic puzzles; Logic puzzles", "domain family 'Logic puzzles' is listed twice"),
    (parse_families, "x" * 201, "is longer than 200 characters"),
    (parse_threshold, "0", "duplicate threshold 0.0: a similarity from 0 (exclusive) to 1 is needed"),
    (parse_threshold, "1.5", "duplicate threshold 1.5: a similarity from 0 (exclusive) to 1 is needed"),
    (parse_threshold, "nan", "duplicate threshold nan: a similarity from 0 (exclusive) to 1 is needed"),
    (parse_threshold, "high", "a similarity from 0 (exclusive) to 1, or 'off', is needed"),
    (parse_wave_size, "0", "wave size 0: a whole number of slots from 1 to 1000 is needed"),
    (parse_wave_size, "2.5", "a whole number of slots per wave from 1 to 1000 is needed"),
])
def test_each_bad_setting_is_refused_with_its_reason(parse, text, why):
    with pytest.raises(AuthoringPlanError) as info:
        parse(text)
    assert why in str(info.value)


def test_good_settings_parse():
    assert parse_families("logic puzzles; word games, riddles\nscheduling") == (
        "logic puzzles", "word games, riddles", "scheduling")
    assert (parse_threshold("0.85"), parse_threshold("OFF"), parse_wave_size("3")) == (0.85, None, 3)


@pytest.mark.parametrize(("var", "value", "why"), [
    ("ENVDUELS_AUTHOR_DOMAINS", ";", "at least one domain family is needed (separate families with ';')"),
    ("ENVDUELS_AUTHOR_DUPLICATE_THRESHOLD", "2", "duplicate threshold 2.0: a similarity from 0 (exclusive) to 1 "
                                                 "is needed"),
    ("ENVDUELS_AUTHOR_WAVE", "-1", "wave size -1: a whole number of slots from 1 to 1000 is needed"),
])
def test_a_bad_authoring_variable_stops_the_settings_naming_it(monkeypatch, var, value, why):
    from envduels_dagster.resources.duel_settings import SettingsError, settings_from_env

    monkeypatch.setenv(var, value)
    with pytest.raises(SettingsError) as info:
        settings_from_env()
    assert str(info.value) == f"{var}={value!r} cannot be used: {why}"


def test_a_plan_refuses_bad_values_when_it_is_made():
    with pytest.raises(AuthoringPlanError, match="at least one domain family"):
        AuthoringPlan(families=())
    with pytest.raises(AuthoringPlanError, match="a list of domain families is needed, not one string"):
        AuthoringPlan(families="logic puzzles")  # type: ignore[arg-type]
    with pytest.raises(AuthoringPlanError, match="wave size True"):
        AuthoringPlan(wave_size=True)  # type: ignore[arg-type]
