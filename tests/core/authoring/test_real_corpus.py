"""Rehearsal with real model text (issue 31): the real replies to prompt version 1 (tests/reply_corpus/authoring-v1/)
are still read and validated under prompt version 2, version 1 is still rendered byte for byte, version 2
answers what the real authors asked, and the duplicate check tells their distinct designs apart."""

from __future__ import annotations

import asyncio
import itertools
import json
import re

import pytest

from envduels_dagster.core.authoring.duplicates import find_duplicate, source_similarity
from envduels_dagster.core.authoring.plan import DEFAULT_DUPLICATE_THRESHOLD
from envduels_dagster.core.authoring.prompts import (
    AUTHOR_SYSTEM_PROMPT,
    PROMPT_VERSION,
    author_messages,
    author_messages_v1,
    spec_from_reply,
)
from envduels_dagster.core.authoring.reply_parsing import parse_author_reply
from envduels_dagster.core.authoring.validation import validate_environment
from tests.helpers.paths import TESTS

REAL = TESTS / "reply_corpus" / "authoring-v1"
SLOTS = range(8)
BRIEFS = ["any domain you like"] * 4 + ["logic puzzles", "text-based resource management", "string transformation",
                                        "hidden-rule inference"]
SEEDS = list(range(8))  # what the corpus was validated on
# (class_name, max_turns) each real reply declares
DECLARED = {0: ("SonarHuntEnv", 10), 1: ("IceCaveEnv", 10), 2: ("TorchBridgeEnv", 14), 3: ("QueenCornerEnv", 24),
            4: ("CounterfeitCoinEnv", 5), 5: ("CastawayRaftEnv", 14), 6: ("LetterPressEnv", 14),
            7: ("EleusisEnv", 24)}


def reply(slot: int) -> str:
    return (REAL / f"slot_{slot}.txt").read_text()


def test_version_1_is_still_rendered_byte_for_byte_as_the_real_authors_read_it():
    for slot in SLOTS:
        prompt = author_messages(slot, 8, BRIEFS[slot], SEEDS)
        system, user = author_messages_v1(prompt.request)
        assert system == {"role": "system", "content": AUTHOR_SYSTEM_PROMPT}
        assert user["content"] == (REAL / f"prompt_{slot}.txt").read_text(), slot


@pytest.mark.parametrize("slot", SLOTS)
def test_every_real_reply_still_parses_and_validates_under_version_2(slot):
    spec = spec_from_reply("real", slot, reply(slot), SEEDS, prompt_version=PROMPT_VERSION)
    assert spec.reject_reason is None, spec.reject_reason
    assert (spec.class_name, spec.max_turns) == DECLARED[slot]
    assert spec.prompt_version == "author-v3"
    checked = asyncio.run(validate_environment(spec))
    assert (checked.valid, checked.winnability, checked.reject_reason) == (True, "proven", None)


def test_version_2_answers_what_the_real_authors_asked():
    """One fragment per question (corpus README and issue 31), each answered in the brief itself."""
    text = author_messages(0, 8)[1]["content"]
    answers = {
        "module-level helpers": "Module-level imports, constants and helper functions are fine",
        "max_turns twice": "Cls(max_turns=N) with N from your JSON; give the constructor the same default",
        "reset(None)": "never None",
        "what a loss returns": "a loss ends with terminated=True and reward 0",
        "the final answer uses a turn": "Every step() is one turn, the final answer included",
        "an invalid action costs a turn": "A malformed or illegal action also uses a turn",
        "step() after the end": "step() is never called after the game ended",
        "is info shown": "The player sees only the observations (never info)",
        "turn budget and state in the text": "every observation must reflect the current state",
        "unreliable oracles": "if observations can be wrong or misleading, say so in the rules",
        "reference may read hidden state": "it may read the hidden\n  state",
        "reference may reset the instance": "calling\n  self.reset(seed) inside is fine",
        "time limits": "must return within a few seconds",
        "one hint for all seeds": "The hint is one fixed string shown for every\nseed",
        "how literal a hint may be": "a hint that spells out the\nreference actions is rejected",
        "who the player is": "another language model, playing one action per turn",
        "prose around the blocks": "prose around them is ignored",
        "backslashes and quotes in JSON": "write a backslash as \\\\ (so \\\\boxed) and a double quote as \\\"",
    }
    missing = {q: a for q, a in answers.items() if a not in text}
    assert not missing, missing
    # the JSON escaping it asks for is what the reader turns back into one backslash
    meta = json.loads('{"hint": "Answer as \\\\boxed{3}, say \\"done\\""}')
    assert meta["hint"] == 'Answer as \\boxed{3}, say "done"'


def test_distinct_real_designs_are_not_duplicates_and_a_renamed_copy_is():
    """The 8 real designs and the 11 parsable corpus replies: no pair reaches the default threshold (the most
    similar scored 0.73 when measured); slot 0 with its class, a constant and the messages renamed scores 1."""
    sources = [parse_author_reply(reply(slot)).source for slot in SLOTS]
    expected = json.loads((TESTS / "reply_corpus" / "expected.json").read_text())
    sources += [parse_author_reply((TESTS / "reply_corpus" / name).read_text()).source
                for name, want in sorted(expected.items()) if "error" not in want]
    assert len(sources) == 19
    worst = max(source_similarity(a, b) for a, b in itertools.combinations(sources, 2))
    assert worst < 0.8 < DEFAULT_DUPLICATE_THRESHOLD, worst
    renamed = re.sub("SonarHuntEnv", "DepthProbe", sources[0]).replace("LIE_PERIOD", "FLIP_EVERY")
    renamed = renamed.replace('"HIGHER"', '"DEEPER"').replace("SONAR HUNT", "DEPTH PROBE")
    assert renamed != sources[0]
    earlier = {f"real.r0.{k}": s for k, s in enumerate(sources[1:8], start=1)} | {"real.r0.0": sources[0]}
    assert find_duplicate(renamed, earlier, DEFAULT_DUPLICATE_THRESHOLD) == ("real.r0.0", pytest.approx(1.0))


V2 = TESTS / "reply_corpus" / "authoring-v2"
V2_PROMPTS = {0: author_messages(0, 2, family="string transformation", seeds=SEEDS),
              1: author_messages(1, 2, family="logic puzzles", seeds=SEEDS,
                                 earlier=["MirrorShiftEnv (string transformation (hidden rewrite rule))"])}


@pytest.mark.parametrize("slot", [0, 1])
def test_the_version_2_rehearsal_replies_are_read_and_their_prompts_are_todays(slot):
    """Replies to version 2 written through hand_endpoint.py (tests/reply_corpus/authoring-v2/README.md)."""
    # answered under version 2; version 3 differs from it only in the slot line, which no longer names the batch size
    answered = (V2 / f"prompt_{slot}.txt").read_text()
    assert V2_PROMPTS[slot][1]["content"] == answered.replace(f"Environment slot: {slot} of 2\n", f"Environment slot: {slot}\n")
    spec = spec_from_reply("rehearsal", slot, (V2 / f"slot_{slot}.txt").read_text(), SEEDS,
                           prompt_version=PROMPT_VERSION)
    assert spec.class_name == ("MirrorShiftEnv", "WrongLabelsEnv")[slot]
    checked = asyncio.run(validate_environment(spec))
    assert (checked.valid, checked.winnability, checked.reject_reason) == (True, "proven", None)
