"""One process at a time for work that must not run twice on one ENVDUELS_HOME (the pilot of ``plan --pilot``).

Why a lock file with ``flock``: two pilots on one home both paid for their calls, then one failed on the
warehouse in use and the other named the internal file ``plans/pilot.new.duckdb`` (issue 44). The kernel
drops a ``flock`` when its process ends however it ends (killed included), so a stale lock never blocks a
re-run; the file keeps the holder's pid and command so the refusal can name it.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class Busy(RuntimeError):
    """Another process holds the lock: the message names it and what to do (the CLI's exit 1)."""


@contextmanager
def exclusive(path: Path, what: str) -> Iterator[None]:
    """Hold ``path``'s lock for the block, or raise :class:`Busy` at once naming the process that holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "a process that did not say"
            raise Busy(f"{what} is already running on this home ({holder}); wait for it to finish, or stop that "
                       "process, and run again") from None
        os.ftruncate(fd, 0)
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        os.pwrite(fd, f"process {os.getpid()}, started {started}: {' '.join(sys.argv)[:200]}".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing the descriptor releases the lock
