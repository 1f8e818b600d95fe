"""The experiment's sizes are one set of options (cli/options.py): ``demo``, ``run`` and ``plan`` declare the same
``--envs-per-author``, ``--seeds`` and ``--rounds``, and a flag accepts exactly what its ``ENVDUELS_*`` variable
accepts (issue 47: three declarations; ``plan``'s help said "else 10" where the stored setting came first)."""

from __future__ import annotations

import argparse

import pytest

from envduels_dagster.cli import build_parser
from envduels_dagster.cli.options import SIZE_OPTIONS
from envduels_dagster.settings.variables import SettingsError, value

COMMANDS = ("demo", "run", "plan")


def subparsers() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_demo_run_and_plan_declare_the_sizes_alike():
    parsers = subparsers()
    for option in SIZE_OPTIONS:
        helps = {name: next(a.help for a in parsers[name]._actions if option in a.option_strings) for name in COMMANDS}
        assert len(set(helps.values())) == 1, helps
        assert "the experiment's stored setting" in helps["plan"]


@pytest.mark.parametrize("option", list(SIZE_OPTIONS))
@pytest.mark.parametrize("text", ["-1", "0", "1", "20", "21", "1000", "1001", "x", "2.5"])
def test_a_size_flag_accepts_what_its_variable_accepts(option, text, capsys):
    variable = SIZE_OPTIONS[option][0]
    try:
        value(variable, {variable: text})
        variable_ok = True
    except SettingsError:
        variable_ok = False
    for command in COMMANDS:
        try:
            args = build_parser().parse_args([command, option, text])
            flag_ok = True
        except SystemExit as exc:
            assert exc.code == 2
            flag_ok = False
            assert f"{option} " in capsys.readouterr().err
        assert flag_ok == variable_ok, (command, option, text)
        if flag_ok:
            assert getattr(args, option[2:].replace("-", "_")) == int(text)
