"""``envduels <cmd> --help`` for every subcommand, found by walking the argparse parser (so a subcommand added
later is covered without editing this file): a description, help on every option, examples, and every example
runs as printed (issue 43: `envduels show novice.r0.3`, the help's own example, failed)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envduels_dagster.cli import build_parser
from envduels_dagster.core.training.format import FORMAT_VERSION

ENVDUELS = str(Path(sys.executable).with_name("envduels"))
SERVING = {"ui": r"Dagster UI: (http://\S+)", "serve-sim": r"(http://\S+)"}  # run until stopped


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def examples(p: argparse.ArgumentParser) -> list[str]:
    text = p.epilog or ""
    return [line.strip() for line in text.split("examples:", 1)[-1].splitlines() if line.strip().startswith("envduels ")]


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_subcommand_has_a_description_help_on_every_option_and_an_example(name):
    p = subcommands()[name]
    out = subprocess.run([ENVDUELS, name, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    description = (p.description or "").strip()
    assert description, f"{name}: no description line"
    assert description.split()[0] in text.split("\n\n", 2)[1], f"{name}: the description is not printed under usage"
    missing = [a.option_strings[0] if a.option_strings else a.dest for a in p._actions
               if a.help != argparse.SUPPRESS and not (a.help or "").strip()]
    assert not missing, f"{name}: options without help: {missing}"
    assert examples(p), f"{name}: no example in its --help"
    for e in examples(p):
        assert e in text
    assert "|" not in (p.usage or "") and "ENV_ID|AUTHOR|SOLVER" not in text


def test_every_option_shows_its_default_in_the_help():
    for name, p in subcommands().items():
        formatter = p._get_formatter()
        for a in p._actions:
            if not a.option_strings or a.help == argparse.SUPPRESS or a.default in (None, False, argparse.SUPPRESS):
                continue
            shown = formatter._get_help_string(a)
            assert "default" in shown, f"{name} {a.option_strings[0]}: its default {a.default!r} is not shown"


MY_ENV = '''import random


class Parity:
    def __init__(self, max_turns=2):
        self.max_turns = max_turns

    def _answer(self, seed):
        return random.Random(seed).choice(["even", "odd"])

    def reset(self, seed):
        self.answer, self.turn = self._answer(seed), 0
        return "Is my hidden number even or odd? The code is sorted.", {}

    def step(self, action):
        self.turn += 1
        won = self.answer in action
        return ("Yes." if won else "No."), float(won), won, not won and self.turn >= self.max_turns, {}

    def reference_actions(self, seed):
        return [self._answer(seed)]
'''


def _serve_until_answering(cmd: str, env: dict, cwd: Path, pattern: str) -> None:
    """Start a serving example, wait for its address line, then stop it with SIGTERM: its whole tree must end."""
    from envduels_dagster.cli.ui import descendants

    proc = subprocess.Popen(["bash", "-c", f"exec {cmd}"], env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen, deadline = [], time.time() + 240
    try:
        while time.time() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if re.search(pattern, line):
                break
        assert any(re.search(pattern, s) for s in seen), f"{cmd}: never printed its address:\n{''.join(seen)}"
        time.sleep(3)
        tree = descendants(proc.pid)
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=60) in (0, 143, -15), "".join(seen)
        time.sleep(1)
        left = [p for p in tree if Path(f"/proc/{p}").exists()
                and Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
        assert not left, f"{cmd}: processes left after SIGTERM: {left}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.mark.slow
def test_every_example_in_the_help_runs(tmp_path, sim_registry):
    """Each example as printed, in a fresh ENVDUELS_HOME, in order: the demo first (it writes what show, report
    and import read), then the rest; serving commands until they print their address, then SIGTERM."""
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(ENVDUELS_HOME=str(home), DAGSTER_HOME=str(home / "dagster"),
               ENVDUELS_REGISTRY=str(sim_registry(["oracle", "novice"])),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", DAGSTER_DISABLE_TELEMETRY="1")
    (tmp_path / "my_env.py").write_text(MY_ENV)  # the file the examples name, as a user's would be
    export = tmp_path / "my_export"  # an export as a user writes one by hand (docs/INPUTS.md)
    export.mkdir()
    (export / "parity.py").write_text(MY_ENV)
    (export / "manifest.json").write_text(json.dumps({"format_version": FORMAT_VERSION, "environments": [
        {"id": "parity", "source": "parity.py", "class_name": "Parity", "max_turns": 2,
         "source_sha256": hashlib.sha256(MY_ENV.encode()).hexdigest()}]}))
    commands = subcommands()
    order = ["demo"] + sorted(set(commands) - {"demo"})
    failures = []
    for name in order:
        for example in examples(commands[name]):
            if name in SERVING:
                _serve_until_answering(example, env, tmp_path, SERVING[name])
                continue
            out = subprocess.run(["bash", "-c", example], env=env, cwd=tmp_path, capture_output=True, text=True,
                                 timeout=900)
            if out.returncode != 0:
                failures.append(f"{example!r} exited {out.returncode}: {out.stderr[-800:]}")
    assert not failures, "\n".join(failures)
