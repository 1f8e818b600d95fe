"""The small SQLite files that hold an instance's money and pacing state, named in every error they raise.

Why a wrapper: ``budget.sqlite`` (the spending ledger), ``provider_limits.sqlite`` (the shared provider
schedule) and ``calls.sqlite`` (the call cache) live beside each other under ENVDUELS_HOME/cache. When one
was corrupt, locked or read-only the user read ``DatabaseError: file is not a database`` or ``database is
locked`` with no file name and no remedy (issue 44). Every use of these files goes through
:func:`state_file`, which turns SQLite's error into a :class:`StateFileError` saying which file, what is
wrong and what to do: delete it to reset what it counts, wait for the process holding it, or fix its
permissions. Stdlib only.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BUSY_TIMEOUT_S = 30.0  # how long a use waits for another process's write lock before it is an error

# What deleting each file costs: the remedy for a corrupt one says it.
RESETS = {
    "budget.sqlite": "spending counted by the budget ledger starts again from $0 (the call cache still saves "
                     "paying twice for calls already made)",
    "provider_limits.sqlite": "the shared provider pacing starts afresh (nothing is lost)",
    "calls.sqlite": "every call is made (and paid) again",
}


class StateFileError(RuntimeError):
    """A state file that cannot be used: the message names it, what is wrong and what to do."""

    def __init__(self, path: Path, problem: str, remedy: str):
        self.path, self.problem, self.remedy = path, problem, remedy
        super().__init__(f"state file {path}: {problem}; {remedy}")


def holders(path: Path) -> list[int]:
    """Pids of other processes of this user with ``path`` (or its -wal/-shm) open; empty where /proc is absent."""
    targets = {str(path), f"{path}-wal", f"{path}-shm"}
    found: list[int] = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in targets for fd in os.listdir(f"/proc/{pid}/fd")):
                found.append(pid)
        except OSError:  # gone, or another user's: not ours to name
            continue
    return found


def explain(path: Path, exc: BaseException) -> StateFileError:
    """The :class:`StateFileError` for SQLite's ``exc`` raised while using ``path``."""
    text = str(exc).lower()
    reset = RESETS.get(path.name, "what it records starts afresh")
    if "locked" in text or "busy" in text:
        pids = holders(path)
        who = f" (process{'es' if len(pids) > 1 else ''} {', '.join(map(str, pids))})" if pids else ""
        return StateFileError(path, "locked by another process", f"wait for the process holding it{who} to finish "
                              "and run again")
    if "readonly" in text or "read-only" in text or "permission" in text:
        return StateFileError(path, "cannot be written (read-only)", f"make it and its directory writable by you "
                              f"(chmod u+w {path} {path.parent}), or point ENVDUELS_HOME at a writable directory")
    if "unable to open" in text or isinstance(exc, OSError):
        return StateFileError(path, f"cannot be opened ({exc})",
                              f"check that {path.parent} exists and is a directory you can write")
    if "not a database" in text or "malformed" in text or "corrupt" in text or isinstance(exc, sqlite3.DatabaseError):
        return StateFileError(path, f"is not a usable SQLite database ({exc})", f"delete it (with -wal and -shm beside "
                              f"it) to reset it: {reset}")
    return StateFileError(path, str(exc), "check the file and its directory")


@contextmanager
def state_file(path: Path) -> Iterator[None]:
    """Run the block; SQLite's errors (and an OS error opening the file) leave it as a named StateFileError."""
    try:
        yield
    except StateFileError:
        raise
    except sqlite3.Error as exc:
        raise explain(Path(path), exc) from exc
    except PermissionError as exc:
        raise explain(Path(path), sqlite3.OperationalError(f"permission denied: {exc}")) from exc
    except OSError as exc:  # its directory cannot be made (a file in the way, a full disk)
        raise explain(Path(path), exc) from exc
