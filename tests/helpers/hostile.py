"""The hostile sandbox suite's world: a guessing game to splice hostile code into (``game``, ``spec``), the
``world`` fixture that records every sandbox a test starts and checks after it that no process, uid or temporary
directory outlived them and the fork server survived, a canary secret that must never leak, and ``rejected``
(validate next to a bystander sandbox that must be unharmed)."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from envduels_dagster.core.authoring.validation import validate_environment
from envduels_dagster.core.protocol import EnvironmentSpec
from envduels_dagster.core.sandbox import SandboxedEnv, SandboxLimits, fork_server_pid

# Generous deadlines (the machine is shared and loaded) but small budgets so that every
# hostile case ends quickly. Defaults: 5 s step, 20 s CPU, 512 MB.
LIMITS = SandboxLimits(step_timeout_s=1.0, load_timeout_s=10.0, cpu_seconds=3, memory_mb=256)
ROOMY = SandboxLimits(step_timeout_s=15.0, load_timeout_s=10.0, cpu_seconds=10, memory_mb=512)
CANARY = "canary-" + os.urandom(12).hex()

TEMPLATE = '''
__PRELUDE__

class Game:
    """Guess seed % 4; the reference guesses it."""

    def __init__(self, max_turns=6):
        self.max_turns = max_turns
__INIT__

    def reset(self, seed):
        self.secret = seed % 4
        self.turn = 0
__RESET__
        return "Guess a number from 0 to 3.", {}

    def step(self, action):
__STEP__
        self.turn += 1
        if action == "\\\\boxed{" + str(self.secret) + "}":
            return "Correct!", 1.0, True, False, {}
        return "Wrong.", 0.0, False, self.turn >= self.max_turns, {}

    def reference_actions(self, seed):
__REFERENCE__
        return [str(seed % 4)]
'''


def game(*, init: str = "", reset: str = "", step: str = "", reference: str = "", prelude: str = "") -> str:
    """The guessing game with hostile code spliced into the given methods."""
    source = TEMPLATE.replace("__PRELUDE__", textwrap.dedent(prelude).strip())
    for marker, body in (("__INIT__", init), ("__RESET__", reset), ("__STEP__", step), ("__REFERENCE__", reference)):
        body = textwrap.indent(textwrap.dedent(body).strip(), " " * 8) if body.strip() else "        pass"
        source = source.replace(marker, body)
    return source


BENIGN = game()


def spec(source: str, env_id: str = "hostile") -> EnvironmentSpec:
    return EnvironmentSpec(env_id=env_id, author="attacker", class_name="Game", max_turns=6, source=source,
                           benchmark_seeds=[0, 1])


def _status(pid: str) -> dict[str, str]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def processes() -> list[tuple[int, int, int, str]]:
    """(pid, ppid, real uid, name) of every process."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and (st := _status(pid)):
            out.append((int(pid), int(st["PPid"]), int(st["Uid"].split()[0]), st["Name"].strip()))
    return out


class World:
    """What a test's sandboxes leave behind; checked after every test."""

    def __init__(self, tempdir: str):
        self.tempdir = tempdir
        self.sandboxes: list[SandboxedEnv] = []
        self.uids: set[int] = set()

    def leftovers(self) -> list[tuple[int, int, int, str]]:
        me, server = os.getpid(), fork_server_pid()
        return [p for p in processes() if p[2] in self.uids                   # a sandbox uid
                or (server is not None and p[1] == server)                    # a fork server child
                or (p[1] == me and p[0] != server)]                           # a worker of ours

    def check(self, server_before: int | None) -> None:
        assert self.sandboxes, "the test started no sandbox"
        for env in self.sandboxes:
            assert env._proc is None and env._chan is None, "a sandbox was not closed"
        # Workers are reaped before close() returns; only bubblewrap's inner processes die
        # asynchronously (with their pid namespace), so allow the kernel a moment.
        deadline = time.monotonic() + 3.0
        while (left := self.leftovers()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert left == [], f"processes outlived their sandboxes: {left}"
        server = fork_server_pid()
        assert os.listdir(self.tempdir) == [], "temporary working directories leaked"
        if server_before is not None:
            assert server == server_before, "the fork server was killed or replaced"


@pytest.fixture
def world(monkeypatch):
    tempdir = tempfile.mkdtemp(prefix="envduels-hostile-")
    os.chmod(tempdir, 0o711)
    monkeypatch.setattr(tempfile, "tempdir", tempdir)
    monkeypatch.setenv("ENVDUELS_CANARY_SECRET", CANARY)
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    w = World(tempdir)
    original = SandboxedEnv.start

    async def start(self):
        w.sandboxes.append(self)
        try:
            await original(self)
        finally:
            if self.uid is not None:
                w.uids.add(self.uid)

    monkeypatch.setattr(SandboxedEnv, "start", start)
    asyncio.run(_warm_up())  # the fork server exists before the attack, so its survival can be checked
    server_before = fork_server_pid()
    w.sandboxes.clear()
    yield w
    w.check(server_before)
    shutil.rmtree(tempdir, ignore_errors=True)


async def _warm_up() -> None:
    async with SandboxedEnv(BENIGN, "Game", 6, LIMITS) as env:
        await env.reset(0)


def assert_no_canary(*outputs: object) -> None:
    for out in outputs:
        text = out.model_dump_json() if hasattr(out, "model_dump_json") else repr(out)
        assert CANARY not in text, "the canary secret leaked into an output"


async def alongside(coro):
    """Run ``coro`` while a benign environment lives in another sandbox; it must be unharmed."""
    async with SandboxedEnv(BENIGN, "Game", 6, LIMITS) as bystander:
        assert await bystander.reset(2) == ("Guess a number from 0 to 3.", {})
        assert await bystander.step("\\boxed{1}") == ("Wrong.", 0.0, False, False, {})
        result = await coro
        # Its worker survived the attack, with its state intact (the turn counter went on).
        assert await bystander.step("\\boxed{3}") == ("Wrong.", 0.0, False, False, {})
        assert await bystander.step("\\boxed{2}") == ("Correct!", 1.0, True, False, {})
        await bystander.sync()
    return result


def rejected(source: str, limits: SandboxLimits = LIMITS) -> str:
    """Validate the environment next to a bystander; return its reject reason."""
    result = asyncio.run(alongside(validate_environment(spec(source), limits)))
    assert_no_canary(result)
    assert result.valid is False, "the hostile environment was accepted"
    return result.reject_reason
