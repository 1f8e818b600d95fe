"""The ``envduels`` console script as a real subprocess: ``envduels(env, *args)`` runs it, ``cli_env`` is a fixture of its
environment (a private home, two simulated models), ``one_error_line`` checks the one-line error boundary,
``build_export`` writes an export directory of ``GOOD`` (a winnable parity game) and other sources."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ENVDUELS = shutil.which("envduels", path=str(Path(sys.executable).parent)) or str(Path(sys.executable).parent / "envduels")


GOOD = '''import random


class Parity:
    def __init__(self, max_turns=2):
        self.max_turns = max_turns

    def _answer(self, seed):
        return random.Random(seed).choice(["even", "odd"])

    def reset(self, seed):
        self.answer = self._answer(seed)
        self.turn = 0
        return "Is my hidden number even or odd?", {}

    def step(self, action):
        self.turn += 1
        won = self.answer in action
        truncated = not won and self.turn >= self.max_turns
        return ("Yes." if won else "No."), float(won), won, truncated, {}

    def reference_actions(self, seed):
        return [self._answer(seed)]
'''


@pytest.fixture
def cli_env(envduels_home, sim_registry):
    """Environment for the subprocess: a private home and a registry of two simulated models."""
    env = dict(os.environ)
    env["ENVDUELS_HOME"] = str(envduels_home)
    env["ENVDUELS_REGISTRY"] = str(sim_registry(["oracle", "novice"]))
    return env


def envduels(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([ENVDUELS, *map(str, args)], env=env, capture_output=True, text=True, timeout=120)


def build_export(root: Path, sources: dict[str, str]) -> Path:
    """An EnvDuels export v1: manifest + sources + metadata + privileged hint files."""
    entries = []
    for env_id, source in sources.items():
        (root / "envs").mkdir(parents=True, exist_ok=True)
        (root / "meta").mkdir(exist_ok=True)
        (root / "privileged").mkdir(exist_ok=True)
        (root / "envs" / f"{env_id}.py").write_text(source)
        (root / "meta" / f"{env_id}.json").write_text(json.dumps({"benchmark_seeds": [0, 1]}))
        (root / "privileged" / f"{env_id}.json").write_text(
            json.dumps({"environment_id": env_id, "hints": {"hint_1": "Think about parity.", "hint_2": "Guess."}}))
        entries.append({
            "id": env_id, "source": f"envs/{env_id}.py",
            "source_sha256": hashlib.sha256(source.encode()).hexdigest(),
            "class_name": "Parity", "max_turns": 2, "domain": "logic", "split": "test", "author": "someone",
            "metadata": f"meta/{env_id}.json", "privileged": f"privileged/{env_id}.json",
        })
    (root / "manifest.json").write_text(json.dumps({"format_version": 1, "environments": entries}))
    return root


def one_error_line(out: subprocess.CompletedProcess) -> str:
    """stderr holds exactly one line, the error, and no traceback."""
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("envduels: error: ") and "Traceback" not in out.stderr
    return lines[0]


SIZE_VARS = ("ENVDUELS_ENVS_PER_AUTHOR", "ENVDUELS_SEEDS", "ENVDUELS_ROUNDS", "ENVDUELS_REGISTRY")


@pytest.fixture
def home(envduels_home, monkeypatch):
    for var in SIZE_VARS:
        monkeypatch.delenv(var, raising=False)
    envduels_home.mkdir(parents=True)
    return envduels_home
