"""A bad authoring setting (issue 31) stops `envduels demo` with one line naming the variable, exit 2, and
nothing written: the same boundary as a bad ENVDUELS_SEEDS (tests/flows/test_cli.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import cli_env, envduels, one_error_line

__all__ = ["cli_env"]  # the fixture, imported so this module can use it


# One variable here (a CLI start is ~13 s on a loaded 2-core machine); every variable's message is tested on
# settings_from_env in tests/core/authoring/test_authoring_slots.py.
@pytest.mark.parametrize(("var", "value", "why"), [
    ("ENVDUELS_AUTHOR_WAVE", "0", "wave size 0: a whole number of slots from 1 to 1000 is needed"),
])
def test_demo_with_a_bad_authoring_variable_is_one_line_exit_2_and_writes_nothing(cli_env, var, value, why):
    out = envduels({**cli_env, var: value}, "demo")
    assert out.returncode == 2
    assert one_error_line(out) == f"envduels: error: settings: {var}='{value}' cannot be used: {why}"
    assert not Path(cli_env["ENVDUELS_HOME"]).exists()  # no instance, warehouse or log was started
