"""Run untrusted environment code in a confined worker process (DESIGN §3).

Why a process per environment instance: model-written code must never share memory,
file descriptors or secrets with the orchestrator, and a runaway environment must be
killable without killing the run. The worker (``worker.py``, stdlib only) confines
itself -- network, IPC and mount namespaces, unprivileged uid, rlimits, seccomp --
before it sees the code; this side enforces wall-clock deadlines, kills the worker,
and re-checks every reply, because the code that writes replies shares its process
with the environment and could be subverted by it.

The parts: ``limits`` (what a worker may use, sent to it at start), ``channel``
(JSON-lines framing and request ids), ``replies`` (judging replies and deaths),
``launchers`` (one interface: ``fork_server``, ``exec``, ``bwrap``), ``env``
(the handle) and ``self_check`` (the conformance suite every launcher passes).
docs/THREAT-MODEL.md says what each layer stops and what it does not.
"""

from envduels_dagster.core.sandbox.env import SandboxedEnv
from envduels_dagster.core.sandbox.launchers import WORKER_SCRIPT, Launcher, get_launcher, launcher_names
from envduels_dagster.core.sandbox.limits import (
    ALLOWED_MODULES_SENTENCE,
    ERROR_KINDS,
    MAX_INFO_DEPTH,
    MAX_MESSAGE_CHARS,
    MAX_REFERENCE_ACTIONS,
    UID_BASE,
    UID_SPAN,
    WRAPPERS,
    SandboxError,
    SandboxLimits,
)

__all__ = [
    "ALLOWED_MODULES_SENTENCE", "ERROR_KINDS", "MAX_INFO_DEPTH", "MAX_MESSAGE_CHARS", "MAX_REFERENCE_ACTIONS",
    "UID_BASE", "UID_SPAN", "WORKER_SCRIPT", "WRAPPERS", "Launcher", "SandboxError", "SandboxLimits",
    "SandboxedEnv", "fork_server_pid", "get_launcher", "launcher_names", "shutdown_fork_server",
]


def _pool():
    from envduels_dagster.core.sandbox.fork_server import ForkServerLauncher

    launcher = get_launcher("fork_server")
    assert isinstance(launcher, ForkServerLauncher)
    return launcher.pool


def fork_server_pid() -> int | None:
    """The running fork server's pid in this process, if any (for tests and diagnostics)."""
    return _pool().pid()


def shutdown_fork_server() -> None:
    """Stop the fork servers (they take any live workers with them); the next worker starts a new one."""
    _pool().shutdown()
