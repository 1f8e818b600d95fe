"""The environment protocol: action parsing, prompt convention, success rule, records."""

from __future__ import annotations

import pytest

from envduels_dagster.core.protocol import (
    SOLVER_SYSTEM_PROMPT,
    EnvironmentSpec,
    first_user_message,
    format_action,
    is_success,
    parse_boxed,
    sha256_text,
)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("\\boxed{42}", "42"),
        ("I think the answer is \\boxed{ north } because of the wall.", "north"),  # stripped
        # nested braces are kept as long as they balance
        ("\\boxed{f{x}}", "f{x}"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\boxed{{a}{b{c}}}", "{a}{b{c}}"),
        # several boxes: only the final one counts
        ("First \\boxed{1}, then I changed my mind: \\boxed{2}", "2"),
        ("\\boxed{a} \\boxed{b} \\boxed{c}", "c"),
        # an unclosed final box falls back to the last closed one before it
        ("\\boxed{7} and then \\boxed{8", "7"),
        ("\\boxed{7} then \\boxed{f{8}", "7"),
        # an empty box parses to an empty action (not a format error)
        ("\\boxed{}", ""),
        ("\\boxed{   }", ""),
        # a box inside a box: the outer one is the final balanced box ending last
        ("\\boxed{outer \\boxed{inner}}", "inner"),
    ],
)
def test_parse_boxed_finds_the_final_balanced_box(reply, expected):
    assert parse_boxed(reply) == expected


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "no action here",
        "boxed{5}",                # missing backslash
        "\\boxed 5",               # no braces
        "\\boxed{unclosed",        # the only box never closes
        "\\boxed{a{b}",            # inner brace closes, the box does not
        "\\fbox{5}",
    ],
)
def test_parse_boxed_returns_none_without_a_complete_box(reply):
    assert parse_boxed(reply) is None


def test_nested_box_rule_is_the_last_start():
    """Starts are scanned left to right and each closed one overwrites the previous result,
    so for ``\\boxed{outer \\boxed{inner}}`` the inner box (which starts last) wins. This is
    the documented "final box" rule: the final *start* that closes."""
    assert parse_boxed("\\boxed{x \\boxed{y}} tail \\boxed{z") == "y"


def test_format_action_round_trips_through_parse():
    for action in ("north", "f{x}", "42", ""):
        assert parse_boxed(format_action(action)) == action
    assert format_action("go") == "\\boxed{go}"


def test_first_user_message_convention():
    cold = first_user_message("You are at (0, 0).", None)
    assert cold == "Observation: You are at (0, 0)."
    hinted = first_user_message("You are at (0, 0).", "The exit is bottom-right.")
    assert hinted == "Hint: The exit is bottom-right.\n\nObservation: You are at (0, 0)."
    # the hint comes first, the observation last, and an empty hint means the cold condition
    assert hinted.startswith("Hint: ") and hinted.endswith(cold)
    assert first_user_message("obs", "") == "Observation: obs"


def test_solver_system_prompt_states_the_rules():
    prompt = SOLVER_SYSTEM_PROMPT.lower()
    assert "interactive" in prompt
    assert "\\boxed{" in SOLVER_SYSTEM_PROMPT
    assert "one action" in prompt
    assert "final" in prompt


@pytest.mark.parametrize(
    ("terminated", "reward", "success"),
    [
        (True, 1.0, True),
        (True, 0.001, True),
        (True, 0.0, False),    # ended without reward
        (True, -1.0, False),
        (False, 1.0, False),   # reward mid-episode is not a success
        (False, 0.0, False),
    ],
)
def test_is_success_needs_terminated_and_positive_reward(terminated, reward, success):
    assert is_success(terminated, reward) is success


def test_environment_spec_hashes_its_source_and_bounds_max_turns():
    spec = EnvironmentSpec(env_id="e", author="a", class_name="E", max_turns=3, source="class E: pass\n")
    assert spec.source_sha256 == sha256_text("class E: pass\n")
    assert len(spec.source_sha256) == 64
    assert spec.valid is False and spec.winnability == "unproven"
    assert spec.benchmark_seeds == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="max_turns"):
        EnvironmentSpec(env_id="e", author="a", class_name="E", max_turns=0, source="x")
