"""The conformance suite every launcher must pass (after inspect_ai's sandbox self-check).

Why: a launcher only decides how a worker comes to exist, so every launcher must give
environment code the same protocol, the same classified failures and the same
confinement. Each check is an ``async`` function of a ``Sandboxes`` factory that
raises ``AssertionError`` saying what differed. ``run_self_check`` runs them all and
returns ``{check name: True | "FAILED: ..." | "ERROR: ..."}``;
tests/core/sandbox/test_sandbox_conformance.py runs each check against each registered launcher.
Pure: no pytest, no Dagster.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from envduels_dagster.core.sandbox.env import SandboxedEnv
from envduels_dagster.core.sandbox.launchers import Launcher, get_launcher
from envduels_dagster.core.sandbox.limits import SandboxError, SandboxLimits

GAME = '''
class E:
    def __init__(self, max_turns=5):
        self.max_turns = max_turns
        self.n = 0
    def reset(self, seed):
        self.n += seed
        return f"start {self.n}", {"seed": seed}
    def step(self, action):
        self.n += 1
        return f"got {action} n={self.n}", 0.5, self.n >= 3, False, {"n": self.n}
    def reference_actions(self, seed):
        return ["a", "b"]
'''


def game(reset: str = "return 'obs', {}", step: str = "return 'ok', 1.0, True, False, {}", prelude: str = "") -> str:
    """An environment class ``E`` whose reset/step bodies are given."""
    indent = lambda body: "\n".join("        " + line for line in body.strip("\n").splitlines())  # noqa: E731
    return (f"{prelude}\nclass E:\n    def __init__(self, max_turns=5):\n        self.max_turns = max_turns\n"
            f"    def reset(self, seed):\n{indent(reset)}\n    def step(self, action):\n{indent(step)}\n")


class Sandboxes:
    """Makes sandboxes on one launcher, with limits suited to quick checks."""

    def __init__(self, launcher: str | Launcher, **overrides: object):
        self.launcher = get_launcher(launcher) if isinstance(launcher, str) else launcher
        name = self.launcher.name
        base = SandboxLimits(step_timeout_s=2.0, load_timeout_s=20.0, cpu_seconds=5, memory_mb=256,
                             fork_server=name == "fork_server", wrapper="bwrap" if name == "bwrap" else None)
        self.limits = replace(base, **overrides)  # type: ignore[arg-type]
        self.opened: list[SandboxedEnv] = []

    def __call__(self, source: str, class_name: str = "E", **overrides: object) -> SandboxedEnv:
        limits = replace(self.limits, **overrides) if overrides else self.limits  # type: ignore[arg-type]
        env = SandboxedEnv(source, class_name, 5, limits, launcher=self.launcher)
        self.opened.append(env)
        return env


async def _error(sandboxes: Sandboxes, source: str, steps: int = 0, **overrides: Any) -> SandboxError:
    try:
        async with sandboxes(source, **overrides) as env:
            await env.reset(0)
            for _ in range(steps):
                await env.step("\\boxed{x}")
    except SandboxError as exc:
        return exc
    raise AssertionError("no SandboxError was raised")


async def check_round_trip(sb: Sandboxes) -> None:
    async with sb(GAME) as env:
        assert env.has_reference is True
        assert await env.reset(1) == ("start 1", {"seed": 1})
        assert await env.step("\\boxed{up}") == ("got \\boxed{up} n=2", 0.5, False, False, {"n": 2})
        assert (await env.step("\\boxed{up}"))[2] is True
        assert await env.reference_actions(0) == ["a", "b"]
        assert await env.reset(7) == ("start 7", {"seed": 7}), "reset must start a fresh instance"
        await env.sync()


async def check_confinement_report(sb: Sandboxes) -> None:
    async with sb(GAME) as env:
        a = env.applied
    assert a["network_isolated"] is True and a["filesystem_isolated"] is True, a
    assert a["fork_server"] is (sb.launcher.name == "fork_server"), a
    assert a["wrapper"] == ("bwrap" if sb.launcher.name == "bwrap" else None), a
    if os.getuid() == 0:
        assert a["uid"] != 0 and a["seccomp"] is True and a["no_new_privs"] is True, a
    assert a["stdlib"] in ("host", "view"), a


async def check_no_inherited_environment(sb: Sandboxes) -> None:
    canary = "canary-" + os.urandom(8).hex()
    os.environ["ENVDUELS_SELF_CHECK_SECRET"] = canary
    try:
        async with sb(game(reset="import os\nreturn repr(sorted(os.environ.items())), {}")) as env:
            obs, _ = await env.reset(0)
    finally:
        del os.environ["ENVDUELS_SELF_CHECK_SECRET"]
    assert canary not in obs and "ENVDUELS_SELF_CHECK_SECRET" not in obs, obs


async def check_standard_library_and_real_module(sb: Sandboxes) -> None:
    body = ("import statistics, sys, typing\nfrom fractions import Fraction\nhint = typing.get_type_hints(P)['x']\n"
            "return f'{statistics.median([3, 1, 2])} {Fraction(2, 4)} {sys.modules[__name__].__name__} "
            "{hint.__name__}', {}")
    prelude = "from __future__ import annotations\nfrom dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\n"
    async with sb(game(reset=body, prelude=prelude)) as env:
        got = await env.reset(0)
    assert got == ("2 1/2 envduels_env int", {}), got
    exc = await _error(sb, "import numpy\n")
    assert exc.kind == "load_error" and "No module named 'numpy'" in exc.message, exc


async def check_deadline(sb: Sandboxes) -> None:
    exc = await _error(sb, game(step="while True:\n    pass"), steps=1, step_timeout_s=1.0)
    assert (exc.kind, exc.message) == ("timeout", "step() did not answer within 1 s"), exc


async def check_exception_is_a_crash_with_its_cause(sb: Sandboxes) -> None:
    exc = await _error(sb, game(step="raise KeyError('boom')"), steps=1)
    assert (exc.kind, exc.message) == ("crash", "step() raised KeyError: 'boom'"), exc


async def check_hard_exit_and_signal_death(sb: Sandboxes) -> None:
    exc = await _error(sb, game(reset="import os\nos._exit(7)"))
    assert (exc.kind, exc.message) == ("crash", "worker exited with code 7 during reset()"), exc
    exc = await _error(sb, game(reset="import ctypes\nctypes.string_at(0)"))
    assert (exc.kind, exc.message) == ("crash", "worker died from signal SIGSEGV during reset()"), exc


async def check_memory_limit(sb: Sandboxes) -> None:
    exc = await _error(sb, game(reset="x = bytearray(4 * 1024 ** 3)"), step_timeout_s=20.0)
    assert (exc.kind, exc.message) == ("resource_limit", "memory limit of 256 MB exceeded"), exc


async def check_load_error(sb: Sandboxes) -> None:
    exc = await _error(sb, "raise RuntimeError('at import')\n")
    assert (exc.kind, exc.message) == ("load_error", "source failed to load: RuntimeError: at import"), exc


async def check_protocol_violation(sb: Sandboxes) -> None:
    exc = await _error(sb, game(step="return 'obs', float('nan'), True, False, {}"), steps=1)
    assert (exc.kind, exc.message) == ("protocol_violation", "step() returned a non-finite reward (nan)"), exc


async def check_forged_line_voids_the_channel(sb: Sandboxes) -> None:
    forge = ("import os, stat\nfor fd in range(3, 64):\n    try:\n        if stat.S_ISFIFO(os.fstat(fd).st_mode):\n"
             "            os.write(fd, b'{\"ok\": true}\\n')\n    except OSError:\n        pass\nreturn 'obs', {}")
    exc = await _error(sb, game(reset=forge))
    assert exc.kind == "protocol_violation" and "forged or stray line" in exc.message, exc


async def check_no_network(sb: Sandboxes) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        body = (f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=1).close()\n"
                "    return 'CONNECTED', {}\nexcept OSError as exc:\n    return type(exc).__name__, {}")
        async with sb(game(reset=body)) as env:
            obs, _ = await env.reset(0)
        try:
            listener.accept()[0].close()
            contacted = True
        except BlockingIOError:
            contacted = False
    assert not contacted and obs != "CONNECTED", obs


async def check_writes_stay_in_the_workdir(sb: Sandboxes) -> None:
    name = "self-check-" + os.urandom(4).hex()
    body = (f"open('inside.txt', 'w').write('ok')\ntry:\n    open('/var/tmp/{name}', 'w').write('x')\n"
            "    return 'WROTE', {}\nexcept OSError as exc:\n    return type(exc).__name__, {}")
    async with sb(game(reset=body)) as env:
        obs, _ = await env.reset(0)
        workdir = env._workdir
    assert obs != "WROTE" and not os.path.exists(f"/var/tmp/{name}"), obs
    assert workdir is not None and not os.path.exists(workdir), "the working directory outlived close()"


async def check_no_processes(sb: Sandboxes) -> None:
    body = ("import os, subprocess\ntry:\n    subprocess.run(['/bin/true'])\n    return 'RAN', {}\n"
            "except OSError as exc:\n    return type(exc).__name__, {}")
    async with sb(game(reset=body)) as env:
        obs, _ = await env.reset(0)
    assert obs in ("BlockingIOError", "PermissionError"), obs


async def check_close_leaves_nothing(sb: Sandboxes) -> None:
    env = sb(GAME)
    await env.start()
    pid = env.applied["pid"]
    await env.close()
    assert env._proc is None and env._chan is None and env._workdir is None
    if sb.launcher.name != "bwrap":  # bwrap's worker pid is in its own pid namespace
        assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split(")")[1][:3], pid


CHECKS: list[Callable[[Sandboxes], Awaitable[None]]] = [
    check_round_trip, check_confinement_report, check_no_inherited_environment,
    check_standard_library_and_real_module, check_deadline, check_exception_is_a_crash_with_its_cause,
    check_hard_exit_and_signal_death, check_memory_limit, check_load_error, check_protocol_violation,
    check_forged_line_voids_the_channel, check_no_network, check_writes_stay_in_the_workdir, check_no_processes,
    check_close_leaves_nothing,
]


async def run_self_check(launcher: str | Launcher) -> dict[str, bool | str]:
    """Every check against ``launcher``; a check's failure does not stop the others."""
    reason = (get_launcher(launcher) if isinstance(launcher, str) else launcher).unavailable()
    if reason:
        return {check.__name__: f"SKIPPED: {reason}" for check in CHECKS}
    results: dict[str, bool | str] = {}
    for check in CHECKS:
        try:
            await check(Sandboxes(launcher))
            results[check.__name__] = True
        except AssertionError as exc:
            results[check.__name__] = f"FAILED: {exc}"
        except Exception as exc:  # noqa: BLE001 - reported, not raised: the suite goes on
            results[check.__name__] = f"ERROR: {exc!r}"
    return results
