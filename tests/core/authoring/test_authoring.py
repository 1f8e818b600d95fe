"""Author replies: forgiving parsing, malformed replies become rejected specs, never exceptions."""

from __future__ import annotations

import asyncio
import json

import pytest

from envduels_dagster.core.authoring.prompts import (
    AuthorReplyError,
    author_environments,
    author_messages,
    parse_author_reply,
    spec_from_reply,
)
from envduels_dagster.core.models import Gateway
from envduels_dagster.core.models.call_cache import CallCache
from envduels_dagster.core.models.registry import load_registry
from tests.helpers.environments import CODE

META = {"class_name": "Coin", "domain": "chance", "hint": "Seeds decide the side.", "max_turns": 2}


def fence(lang: str, body: str) -> str:
    return f"```{lang}\n{body}```"


def test_prose_around_labelled_fences():
    reply = (
        "Sure! Here is my environment. It is a coin game.\n\n"
        + fence("python", CODE)
        + "\n\nAnd the metadata you asked for:\n\n"
        + fence("json", json.dumps(META, indent=2) + "\n")
        + "\n\nLet me know if you want changes."
    )
    parsed = parse_author_reply(reply)
    assert parsed.source == CODE
    assert (parsed.class_name, parsed.domain, parsed.hint, parsed.max_turns) == ("Coin", "chance",
                                                                                  "Seeds decide the side.", 2)


def test_unlabelled_fences():
    reply = "Code:\n" + fence("", CODE) + "\nMeta:\n" + fence("", json.dumps(META) + "\n")
    parsed = parse_author_reply(reply)
    assert parsed.source == CODE
    assert parsed.class_name == "Coin" and parsed.max_turns == 2


def test_unlabelled_metadata_fence_without_class_name():
    meta = {"hint": "Seeds decide the side.", "max_turns": 2}
    reply = fence("", CODE) + "\n" + fence("", json.dumps(meta) + "\n")
    parsed = parse_author_reply(reply)
    assert parsed.class_name == "Coin"  # inferred from the code
    assert parsed.hint == "Seeds decide the side."


def test_py_label_and_inline_metadata_object():
    reply = fence("py", CODE) + '\nMetadata: {"class_name": "Coin", "hint": "Seeds decide.", "max_turns": 2}\n'
    parsed = parse_author_reply(reply)
    assert (parsed.class_name, parsed.hint, parsed.domain) == ("Coin", "Seeds decide.", "unknown")


def test_class_inferred_when_metadata_omits_it():
    meta = {k: v for k, v in META.items() if k != "class_name"}
    helper = "class Helper:\n    pass\n\n\n"  # not an environment: no reset/step
    parsed = parse_author_reply(fence("python", helper + CODE) + fence("json", json.dumps(meta) + "\n"))
    assert parsed.class_name == "Coin"
    assert parsed.max_turns == 2


def test_default_max_turns_when_metadata_omits_it():
    meta = {"hint": "Seeds decide the side."}
    assert parse_author_reply(fence("python", CODE) + fence("json", json.dumps(meta) + "\n")).max_turns == 10


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I would write a coin game, but here is only a description.", "reply contains no ```python code block"),
        (fence("text", "just words\n"), "reply contains no ```python code block"),
        # json-repair completes a cut-off object; the missing value is then named, with the JSON error
        (fence("python", CODE) + fence("json", '{"class_name": "Coin", "hint": \n'),
         "reply gives no hint (metadata field 'hint' is missing or empty) "
         "(metadata repaired from invalid JSON: Expecting value at line 2)"),
        (fence("python", CODE) + fence("json", '{{{\n'), "metadata block is not valid JSON: Expecting property name "
                                                         "enclosed in double quotes at line 1"),
        (fence("python", CODE) + fence("yaml", 'hint: [unclosed\n'),
         "metadata block is not valid YAML (and not JSON: Expecting value at line 1)"),
        (fence("python", CODE) + fence("yaml", '- a list\n'), "metadata block must be a YAML mapping (got a list)"),
        (fence("python", CODE) + fence("json", '["Coin", "hint"]\n'), "metadata block must be a JSON object"),
        (fence("python", CODE), "reply gives no hint (metadata field 'hint' is missing or empty)"),
        (fence("python", CODE) + fence("json", '{"class_name": "Coin", "hint": "  "}\n'),
         "reply gives no hint"),
        (fence("python", CODE) + fence("json", '{"hint": "h", "max_turns": "many"}\n'),
         "max_turns 'many' is not an integer"),
        (fence("python", CODE) + fence("json", '{"hint": "h", "max_turns": 0}\n'), "max_turns 0 is outside 1..200"),
        (fence("python", CODE + "\n" + CODE.replace("Coin", "Dice")) + fence("json", '{"hint": "h"}\n'),
         "metadata gives no class_name and the code defines 2 environment classes"),
        (fence("python", "x = 1\n") + fence("json", '{"hint": "h"}\n'),
         "metadata gives no class_name and the code defines 0 environment classes"),
    ],
)
def test_malformed_replies_raise_with_a_reason(reply, reason):
    with pytest.raises(AuthorReplyError) as info:
        parse_author_reply(reply)
    assert reason in str(info.value)


def test_spec_from_a_malformed_reply_is_a_rejected_spec():
    spec = spec_from_reply("alice", 3, "no code at all, sorry", seeds=[0, 1], round_=2)
    assert spec.valid is False
    assert spec.reject_reason == "unparsable author reply: reply contains no ```python code block"
    assert spec.author == "alice" and spec.round == 2 and spec.benchmark_seeds == [0, 1]
    assert spec.env_id.startswith("alice.r2.3.")
    assert spec.source == "no code at all, sorry"  # kept for inspection


def test_spec_from_a_good_reply_is_ready_for_validation():
    reply = fence("python", CODE) + fence("json", json.dumps(META) + "\n")
    spec = spec_from_reply("bob", 0, reply, seeds=[0, 1, 2])
    assert spec.reject_reason is None and spec.valid is False  # not validated yet
    assert (spec.class_name, spec.domain, spec.max_turns, spec.hint) == ("Coin", "chance", 2, META["hint"])
    # ids are stable for the same source and differ for another slot
    assert spec.env_id == spec_from_reply("bob", 0, reply, seeds=[0, 1, 2]).env_id
    assert spec.env_id != spec_from_reply("bob", 1, reply, seeds=[0, 1, 2]).env_id


def test_author_prompt_carries_protocol_brief_and_seeds():
    system, user = author_messages(2, 5, domain="navigation puzzles", seeds=[3, 4])
    assert system["role"] == "system" and user["role"] == "user"
    text = user["content"]
    for fragment in ("Cls(max_turns=N)", "reset(seed)", "\\boxed{ACTION}", "reference_actions(self, seed)",
                     "FAILS it cold but PASSES it when given your", "never the literal answer",
                     "Domain brief: navigation puzzles", "Environment slot: 2\n", "seeds [3, 4]"):
        assert fragment in text, fragment
    # the batch size is not in the prompt (version 3): a slot's call is the same however many slots are asked for
    assert author_messages(2, 9, domain="navigation puzzles", seeds=[3, 4])[1] == user


# What each defect of a sloppy simulated author turns into (see sim/author.py DEFECTS):
# leaky_hint, unseeded_randomness, wrong_reference, broken_source, no_code.
DEFECT_REASONS = (
    "hint reveals the reference solution verbatim",
    "reference_actions is not deterministic",
    "reset is not deterministic",
    "reference solution does not win",
    "load_error during loading: source failed to load: ",  # SyntaxError or IndentationError (truncated)
    "unparsable author reply: reply contains no ```python code block",
)


def test_simulated_author_batch_survives_defective_replies(sim_registry, tmp_path):
    """novice is the sloppiest author (30% of its replies are defective). A batch of ten is
    deterministic (the sim's rng is a pure function of the request) and holds defective
    replies next to good ones: none may raise, each defective one is a rejected spec whose
    reason names its defect, and every call is made exactly once."""
    gateway = Gateway(load_registry(sim_registry(["novice"])), CallCache(tmp_path / "calls.sqlite"))
    specs = asyncio.run(author_environments(gateway, "novice", 10, [0, 1, 2, 3]))
    assert len(specs) == 10
    for spec in specs:
        assert spec.valid == (spec.reject_reason is None)
    rejected = [s for s in specs if not s.valid]
    valid = [s for s in specs if s.valid]
    assert valid and rejected
    assert all(s.winnability == "proven" for s in valid)
    for spec in rejected:
        assert any(reason in spec.reject_reason for reason in DEFECT_REASONS), spec.reject_reason
    assert gateway.stats.backend_calls["novice"] == 10


def test_unparsable_sim_reply_in_a_batch_is_rejected_not_raised(sim_registry, tmp_path):
    """Find a slot where a simulated author writes no code at all and check it is rejected."""
    from envduels_dagster.sim.model import SimulatedModel

    model = SimulatedModel("novice")
    count = 12
    replies = [model.respond(author_messages(slot, count), seed=slot) for slot in range(count)]
    no_code = [slot for slot, r in enumerate(replies) if "```" not in r]
    assert no_code, "the sloppiest profile should produce a code-less reply among 12 slots"
    spec = spec_from_reply("novice", no_code[0], replies[no_code[0]], [0, 1])
    assert spec.valid is False
    assert spec.reject_reason == "unparsable author reply: reply contains no ```python code block"


STDLIB_STYLE = '''from __future__ import annotations

import statistics
from fractions import Fraction


class MeanGame:
    """Guess the mean of three numbers, as a fraction."""

    def __init__(self, max_turns: int = 2) -> None:
        self.max_turns = max_turns

    def reset(self, seed: int) -> tuple[str, dict]:
        self.values = [seed % 5, seed % 7, seed % 11]
        self.answer = str(Fraction(sum(self.values), 3))
        return f"Numbers: {self.values}. Their mean as a fraction?", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        ok = self.answer in action
        return ("right" if ok else "wrong"), float(ok), ok, not ok, {"median": statistics.median(self.values)}

    def reference_actions(self, seed: int) -> list[str]:
        values = [seed % 5, seed % 7, seed % 11]
        return [str(Fraction(sum(values), 3))]
'''


def test_the_prompt_states_what_the_sandbox_allows_and_such_code_validates():
    """The brief quotes the sandbox's own sentence; code using modules it names (statistics, fractions,
    ``from __future__``) validates, so an author that follows the brief is not rejected for it."""
    from envduels_dagster.core.authoring.validation import validate_environment
    from envduels_dagster.core.protocol import EnvironmentSpec
    from envduels_dagster.core.sandbox import ALLOWED_MODULES_SENTENCE

    (_, user) = author_messages(0, 3)
    assert ALLOWED_MODULES_SENTENCE in user["content"]
    assert all(name in ALLOWED_MODULES_SENTENCE for name in ("statistics", "fractions", "__future__"))
    assert "random, re, math, itertools, collections, ...)" not in user["content"]
    spec = EnvironmentSpec(env_id="mean", author="a", class_name="MeanGame", max_turns=2, source=STDLIB_STYLE,
                           hint="", benchmark_seeds=[0, 1, 2, 3])
    checked = asyncio.run(validate_environment(spec))
    assert checked.valid, checked.reject_reason
    assert checked.winnability == "proven"
