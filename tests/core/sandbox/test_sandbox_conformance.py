"""One conformance suite (core/sandbox/self_check.py) against every registered launcher.

A launcher only decides how a worker comes to exist; these cases prove that each one
gives environment code the same protocol, failures and confinement. bubblewrap's cases
skip, saying why, where ``bwrap`` is missing (.ci/run installs it).
"""

from __future__ import annotations

import asyncio
import os

import pytest

from envduels_dagster.core.sandbox import get_launcher, launcher_names
from envduels_dagster.core.sandbox.exec_launcher import ExecLauncher
from envduels_dagster.core.sandbox.self_check import CHECKS, Sandboxes, check_no_inherited_environment, run_self_check

pytestmark = pytest.mark.skipif(os.getuid() != 0, reason="the conformance suite asserts root's confinement "
                                                          "(throwaway uids, seccomp)")


def test_every_built_in_launcher_is_registered():
    assert launcher_names() == ["bwrap", "exec", "fork_server"]
    with pytest.raises(ValueError, match=r"unknown sandbox launcher 'docker'; registered: \['bwrap', 'exec', "):
        get_launcher("docker")


def test_a_built_in_launcher_is_one_shared_instance_even_when_threads_ask_first_at_once(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from envduels_dagster.core.sandbox import launchers

    monkeypatch.setattr(launchers, "_REGISTRY", {})  # as in a fresh process: nothing resolved yet
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: get_launcher("exec"), range(32)))
    assert len({id(g) for g in got}) == 1 and isinstance(got[0], ExecLauncher) and got[0].name == "exec"
    assert launchers._REGISTRY == {"exec": got[0]}


@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__ for c in CHECKS])
@pytest.mark.parametrize("launcher", launcher_names())
def test_launcher_passes_the_conformance_check(launcher, check):
    reason = get_launcher(launcher).unavailable()
    if reason:
        pytest.skip(reason)
    sandboxes = Sandboxes(launcher)
    asyncio.run(check(sandboxes))
    assert sandboxes.opened, "the check started no sandbox"
    for env in sandboxes.opened:  # every check closes what it opens
        assert env._proc is None and env._chan is None and env._workdir is None


class LeakyLauncher(ExecLauncher):
    """A broken launcher (made so below): it hands the orchestrator's environment variables on."""

    name = "leaky"


@pytest.mark.slow  # about a second or more (--durations, 1 Dec 2026): kept out of the inner loop
def test_the_suite_catches_a_launcher_that_leaks_the_environment(monkeypatch):
    """Guard against a vacuous suite: a launcher passing secrets on fails the check that looks for them."""
    import envduels_dagster.core.sandbox.exec_launcher as module

    real = module.asyncio.create_subprocess_exec

    async def with_parent_env(*argv, **kwargs):
        kwargs["env"] = dict(os.environ)
        return await real(*argv, **kwargs)

    monkeypatch.setattr(module.asyncio, "create_subprocess_exec", with_parent_env)
    with pytest.raises(AssertionError, match="canary-"):
        asyncio.run(check_no_inherited_environment(Sandboxes(LeakyLauncher())))
    results = asyncio.run(run_self_check(LeakyLauncher()))
    assert results["check_no_inherited_environment"].startswith("FAILED: "), results
    assert results["check_round_trip"] is True, results  # only the broken property fails
