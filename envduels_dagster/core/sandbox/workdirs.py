"""Workers' temporary directories on the host: named after their orchestrator, swept when stale.

Why: a directory is removed by ``SandboxedEnv.close()``, or by the fork server when the
orchestrator dies; when both die at once (SIGKILL of everything, a reboot of the
container) nobody is left to do it, and ``envduels-sbx-*`` directories accumulated in
/tmp (issue 20). Each name carries the orchestrator's pid, so the first sandbox a process
starts removes those whose orchestrator is gone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

PREFIX = "envduels-sbx-"  # the fork server (worker.py) recognises it too
LEGACY_MAX_AGE_S = 24 * 3600  # names without a pid (older versions): swept when this old

_swept: set[tuple[int, str]] = set()


def new_workdir() -> str:
    """A fresh directory for one worker, swept first of stale ones (once per process and tempdir)."""
    base = tempfile.gettempdir()
    if (os.getpid(), base) not in _swept:
        _swept.add((os.getpid(), base))
        sweep_stale(base)
    return tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=base)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(base: str) -> list[str]:
    """Remove working directories in ``base`` whose orchestrator is gone; return them."""
    removed: list[str] = []
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    now = time.time()
    for name in names:
        if not name.startswith(PREFIX):
            continue
        owner, _, rest = name[len(PREFIX):].partition("-")
        path = os.path.join(base, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if owner.isdigit() and rest:
            stale = not _alive(int(owner))
        else:
            stale = now - st.st_mtime > LEGACY_MAX_AGE_S
        if stale and os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
