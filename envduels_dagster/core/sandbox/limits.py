"""What a worker may use and return, stated once for both sides of the pipe.

Why one module: the worker is a stdlib-only script that cannot import this package,
so it used to restate the protocol's limits (info depth, message size, reference
actions). Now the parent sends them in the worker's start configuration
(``worker_config``) and re-checks every reply against the same numbers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

ERROR_KINDS = ("load_error", "timeout", "crash", "protocol_violation", "resource_limit", "sandbox_unavailable")
# What a worker may report about itself; timeouts and unavailability are the parent's to decide.
WORKER_KINDS = ("load_error", "crash", "protocol_violation", "resource_limit")
WRAPPERS = (None, "bwrap")

MAX_MESSAGE_CHARS = 2000
MAX_INFO_DEPTH = 32
MAX_REFERENCE_ACTIONS = 10_000

# Each worker runs under its own throwaway uid so that one environment cannot
# signal or read another's processes; root may setuid to ids with no passwd entry.
# Drawn at random from ~2**31 ids: a per-process counter offset by pid % 1000 gave two
# orchestrator processes whose pids agree mod 1000 (parallel Dagster runs) the same uids.
UID_BASE = 200_000
UID_SPAN = 2**31 - UID_BASE

# What the authoring prompt should promise (core/authoring/prompts.py quotes it): the worker
# gives environment code a read-only view of the interpreter's own standard library
# (no site-packages), and the confinement, not a missing module, refuses what reaches
# the host. tests/core/sandbox/test_sandbox_stdlib.py holds environments written this way.
ALLOWED_MODULES_SENTENCE = (
    "Python standard library only: any standard-library module may be imported "
    "(for example random, re, math, itertools, collections, functools, operator, heapq, bisect, "
    "string, textwrap, dataclasses, typing, enum, abc, statistics, fractions, decimal, json, "
    "and `from __future__ import annotations`); no third-party packages such as numpy. "
    "The environment runs without network, subprocesses, threads or timers, and may write "
    "only small files in its working directory."
)


@dataclass(frozen=True)
class SandboxLimits:
    """Limits applied to every worker. Defaults suit the text games we run.

    ``isolate_network``, ``isolate_filesystem`` and ``drop_privileges`` fail closed: when
    the machine cannot provide them the sandbox refuses to start (``sandbox_unavailable``)
    unless they are turned off knowingly. ``fork_server`` only changes how fast a worker
    starts, not what confines it. ``wrapper="bwrap"`` runs each worker inside bubblewrap
    (``apt-get install -y bubblewrap``): its own pid namespace and a filesystem holding
    only the interpreter, at the price of a full interpreter start per worker.
    """

    step_timeout_s: float = 5.0
    load_timeout_s: float = 10.0
    cpu_seconds: int = 20
    memory_mb: int = 512
    max_open_files: int = 64
    max_file_size_mb: int = 1
    max_observation_chars: int = 20_000
    max_reply_bytes: int = 4 * 1024 * 1024  # any reply line; reset/step replies: step_reply_bytes()
    max_info_bytes: int = 64 * 1024  # an info dict, serialised
    max_info_items: int = 10_000  # values in an info dict, containers included
    isolate_network: bool = True
    drop_privileges: bool = True
    isolate_filesystem: bool = True  # read-only view of the host, private tmpfs workdir of workdir_mb
    workdir_mb: int = 16
    workdir_inodes: int = 2048  # files and directories in it: tmpfs inodes are unreclaimable kernel memory
    narrow_filesystem: bool = True  # a root holding only /usr, /lib*, the stdlib view, /proc, devices
    ipc_mb: int = 8  # System V shared memory in the worker's own IPC namespace
    seccomp: bool = True
    fork_server: bool = True
    wrapper: str | None = None

    def __post_init__(self) -> None:
        if self.wrapper not in WRAPPERS:
            raise ValueError(f"unknown sandbox wrapper {self.wrapper!r}; choose one of {WRAPPERS}")

    def step_reply_bytes(self) -> int:
        """The longest reset/step reply line: an observation of ``max_observation_chars`` (12 bytes
        each at worst, a surrogate pair as JSON escapes it), an info of ``max_info_bytes``, the rest."""
        return 12 * self.max_observation_chars + self.max_info_bytes + 1024

    @property
    def launcher(self) -> str:
        """The name of the launcher these limits ask for (see launchers.py)."""
        if self.wrapper == "bwrap":
            return "bwrap"
        return "fork_server" if self.fork_server else "exec"


class SandboxError(Exception):
    """A failure of the environment inside the sandbox, classified by ``kind``."""

    def __init__(self, kind: str, message: str):
        assert kind in ERROR_KINDS, kind
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


def worker_config(limits: SandboxLimits, workdir: str, uid: int | None) -> dict[str, Any]:
    """The worker's start configuration: its confinement and every limit it enforces itself."""
    return {
        **asdict(limits),
        "workdir": workdir,
        "uid": uid,
        "tmpfs_mb": limits.workdir_mb,
        "wrapped": limits.wrapper is not None,
        "max_info_depth": MAX_INFO_DEPTH,
        "max_message_chars": MAX_MESSAGE_CHARS,
        "max_reference_actions": MAX_REFERENCE_ACTIONS,
    }
