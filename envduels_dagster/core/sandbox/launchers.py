"""How a worker process comes to exist: one interface, several launchers.

Why an interface: the sandbox handle (``SandboxedEnv``) must not care whether its
worker was forked from a preloaded template, started as a fresh interpreter, or
started inside bubblewrap -- the confinement inside the worker is the same, only
speed and the outer layer differ. Each launcher is found by a name (``BUILTIN``, or ``register``);
``SandboxLimits.launcher`` picks one, and tests/core/sandbox/test_sandbox_conformance.py runs one
conformance suite (``self_check.py``) against every registered launcher.
"""

from __future__ import annotations

import abc
import importlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

from envduels_dagster.core.sandbox.limits import SandboxLimits

WORKER_SCRIPT = Path(__file__).with_name("worker.py")


class WorkerProcess(Protocol):
    """A running worker as the handle sees it."""

    pid: int | None

    @property
    def exited(self) -> bool: ...

    def kill(self) -> None:
        """SIGKILL the worker (race-free where the launcher can)."""

    async def wait(self, timeout: float) -> tuple[int | None, float | None]:
        """(exit code, negative for a signal; CPU seconds used) -- None when unknown."""

    def release(self) -> None:
        """Free what the handle holds (fds, readers); the worker is reaped by then."""


class Launcher(abc.ABC):
    """Starts workers whose request pipe is ``req_r`` and reply pipe ``rep_w``."""

    name: str

    def unavailable(self) -> str | None:
        """Why this launcher cannot run on this machine (None: it can)."""
        return None

    @abc.abstractmethod
    async def spawn(self, req_r: int, rep_w: int, workdir: str, limits: SandboxLimits) -> WorkerProcess:
        """Start one worker; the caller closes its copies of the two fds afterwards.

        Raises ``SandboxError("sandbox_unavailable", ...)`` when no worker can be had."""


# The built-in launchers, by name: imported on first use. Named here as data, never imported: each
# launcher module imports this interface, so importing them from here would make a circle.
BUILTIN: dict[str, str] = {
    "exec": "envduels_dagster.core.sandbox.exec_launcher:ExecLauncher",
    "bwrap": "envduels_dagster.core.sandbox.exec_launcher:BwrapLauncher",
    "fork_server": "envduels_dagster.core.sandbox.fork_server:ForkServerLauncher",
}
_REGISTRY: dict[str, Launcher] = {}
_LOCK = threading.Lock()  # one shared instance per name, even when two threads ask first at once
L = TypeVar("L", bound=type[Launcher])


def _install(name: str, cls: type[Launcher]) -> Launcher:
    instance = cls()
    instance.name = name
    _REGISTRY[name] = instance
    return instance


def register(name: str) -> Callable[[L], L]:
    """Class decorator for a launcher from another package: one shared instance, found by ``name``."""

    def deco(cls: L) -> L:
        _install(name, cls)
        return cls

    return deco


def get_launcher(name: str) -> Launcher:
    """The shared instance of the launcher registered (or built in) under ``name``."""
    launcher = _REGISTRY.get(name)
    if launcher is not None:
        return launcher
    target = BUILTIN.get(name)
    if target is None:
        raise ValueError(f"unknown sandbox launcher {name!r}; registered: {launcher_names()}")
    module, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module), attr)
    with _LOCK:
        return _REGISTRY.get(name) or _install(name, cls)


def launcher_names() -> list[str]:
    return sorted({*BUILTIN, *_REGISTRY})
