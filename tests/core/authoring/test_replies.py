"""The reply parser on what models of several families really write (tests/reply_corpus/).

Each corpus file is one reply; expected.json holds the parse it must give (or the exact start of
the rejection). Final answers carry the marker ``FINAL`` and drafts ``DRAFT``: a parse that picks
a draft fails here, which is the silent wrong-environment bug the corpus exists to catch.
"""

from __future__ import annotations

import json
import random
import re

import pytest

from envduels_dagster.core.authoring.reply_parsing import AuthorReplyError, parse_author_reply, strip_reasoning
from tests.helpers.paths import TESTS

CORPUS = TESTS / "reply_corpus"
EXPECTED = json.loads((CORPUS / "expected.json").read_text())


def test_the_corpus_covers_several_model_families_and_every_file_has_an_expectation():
    files = {p.name for p in CORPUS.glob("*.md")}
    assert files == set(EXPECTED)
    assert {"OpenAI", "Claude", "Qwen", "DeepSeek", "Llama"} <= {e["family"] for e in EXPECTED.values()}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_reply_parses_as_expected(name):
    expected = EXPECTED[name]
    reply = (CORPUS / name).read_text()
    if "error" in expected:
        with pytest.raises(AuthorReplyError) as info:
            parse_author_reply(reply)
        assert str(info.value).startswith(expected["error"]), str(info.value)
        return
    parsed = parse_author_reply(reply)
    got = {"class_name": parsed.class_name, "domain": parsed.domain, "hint": parsed.hint,
           "max_turns": parsed.max_turns}
    assert got == {k: expected[k] for k in got}
    assert "FINAL" in parsed.source and "DRAFT" not in parsed.source
    compile(parsed.source, name, "exec")
    assert re.search(rf"^class {parsed.class_name}\b", parsed.source, re.M)


def test_reasoning_sections_of_every_spelling_are_removed():
    for tag in ("think", "THINKING", "reasoning", "reflection", "scratchpad"):
        answer, unclosed = strip_reasoning(f"<{tag}>draft ```python\nclass A: pass\n```</{tag}>final")
        assert (answer, unclosed) == ("final", None), tag
    assert strip_reasoning("plan ... </think>answer") == ("answer", None)  # template opened the section
    assert strip_reasoning("before <thinking>never closed") == ("before ", "thinking")


def test_inline_metadata_with_boxed_hint_and_braces_in_prose():
    code = "```python\nclass G:\n    def reset(self, seed):\n        return '', {}\n\n    def step(self, a):\n" \
           "        return '', 1.0, True, False, {}\n```\n"
    reply = code + 'The set {a, b} is irrelevant. Meta: {"hint": "reply \\\\boxed{left} first", "max_turns": 3}'
    parsed = parse_author_reply(reply)
    assert (parsed.class_name, parsed.hint, parsed.max_turns) == ("G", "reply \\boxed{left} first", 3)


def test_named_class_picks_the_last_block_that_defines_it_over_a_later_helper_block():
    env = "class Env:\n    def reset(self, seed):\n        return '', {}\n    def step(self, a):\n" \
          "        return '', 1.0, True, False, {}\n"
    reply = (f"```python\n{env.replace('Env:', 'Env:  # v1')}```\n```python\n{env}```\n"
             "Usage:\n```python\nenv = Env(max_turns=3)\nprint(env.reset(seed=0))\n```\n"
             '```json\n{"class_name": "Env", "hint": "h"}\n```\n')
    assert parse_author_reply(reply).source == env


def test_repaired_metadata_is_named_in_a_later_rejection():
    reply = "```python\nclass C:\n    def reset(self, s): ...\n    def step(self, a): ...\n```\n" \
            '```json\n{"class_name": "C", "hint": "h", "max_turns": 900\n```\n'  # no closing brace
    with pytest.raises(AuthorReplyError) as info:
        parse_author_reply(reply)
    assert str(info.value) == ("max_turns 900 is outside 1..200 (metadata repaired from invalid JSON: "
                               "Expecting ',' delimiter at line 2)")


@pytest.mark.parametrize(("raw", "reason"), [
    ("true", "max_turns True is not an integer"),
    ("2.5", "max_turns 2.5 is not an integer"),
    ('"many"', "max_turns 'many' is not an integer"),
    ("1e400", "max_turns inf is not an integer"),
])
def test_max_turns_that_is_not_an_integer_is_rejected_by_value(raw, reason):
    reply = "```python\nclass C:\n    def reset(self, s): ...\n    def step(self, a): ...\n```\n" \
            f'```json\n{{"hint": "h", "max_turns": {raw}}}\n```\n'
    with pytest.raises(AuthorReplyError) as info:
        parse_author_reply(reply)
    assert str(info.value) == reason


def test_simulated_authors_replies_parse_exactly_as_the_layout_they_write():
    """sim/author.py writes prose, a ```python block and a ```json block. Whatever the parser learned
    about other layouts, it must read these as before: the source is the text between the fences
    byte for byte (ids are its hash; the demo's leaderboard depends on them) and the metadata is
    the JSON block as written."""
    from envduels_dagster.sim.author import write_environment
    from envduels_dagster.sim.profiles import PROFILES

    seen = 0
    for name, profile in PROFILES.items():
        for slot in range(40):
            reply = write_environment(profile, slot, random.Random(f"{name}/{slot}"))
            m = re.search(r"```python\n(.*?)```\n\n```json\n(.*?)\n```", reply, re.S)
            if m is None:  # the "no_code" defect
                with pytest.raises(AuthorReplyError, match="no ```python code block"):
                    parse_author_reply(reply)
                continue
            parsed = parse_author_reply(reply)
            meta = json.loads(m.group(2))
            assert parsed.source == m.group(1)
            assert parsed.meta == meta
            assert (parsed.class_name, parsed.hint, parsed.max_turns, parsed.family) == (
                meta["class_name"], meta["hint"], meta["max_turns"], meta["family"])
            seen += 1
    assert seen > 150
