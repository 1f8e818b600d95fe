"""Dagster's orphan watcher (``dagster/_core/execution/scripts/watch_orphans.py``), deaf to Ctrl-C.

Why a copy: an in-process run (``envduels demo``, ``import``, ``run``) starts this watcher as a child in the
terminal's process group, so Ctrl-C reached it too and it printed a ``KeyboardInterrupt`` traceback after
the command had said "interrupted" (issue 44: two tracebacks, 3 of 3 tries). Its job is to outlive its
parent and then stop the log tail; it needs no Ctrl-C for that, so it ignores SIGINT and otherwise does what
Dagster's does (``interrupts.quiet_orphan_watchers`` points Dagster at this file). Stdlib only: it starts
with every step.
"""

import os
import signal
import sys
import time


def watch(args: list[str]) -> None:
    if len(args) != 2:
        return
    parent_pid, tail_pid = int(args[0]), int(args[1])
    if not parent_pid or not tail_pid:
        return
    while os.getppid() == parent_pid:  # orphaned once the parent is gone (it is then adopted by another)
        time.sleep(1)
    try:
        os.kill(tail_pid, signal.SIGTERM)
    except OSError:
        pass


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch(sys.argv[1:])
