"""Ctrl-C and SIGTERM end a command quietly: one line, exit 130, no traceback from any thread.

Why one helper for every command: each command met interrupts its own way (issue 44). SIGTERM ended
``plan --pilot`` silently with 143 (Python's default: die at once, the pilot's scratch file left behind);
Ctrl-C on ``import`` waiting for a busy warehouse printed Dagster's stack trace twice; the demo printed two
``KeyboardInterrupt`` tracebacks from Dagster's background threads (the in-process run's orphan watcher)
after its own "interrupted" line. :func:`quiet_interrupts` makes SIGTERM what Ctrl-C is (SIGINT's handler
runs: ``KeyboardInterrupt`` in the main thread, or asyncio's cancellation), and keeps a thread's
interrupt from printing a traceback: the main thread reports it once (``cli.main``: exit 130).
``envduels run`` and any later command get the same by running under it; a command that runs Dagster in
its own process also calls :func:`quiet_orphan_watchers` (the watcher Dagster starts per step is a child
process in the terminal's group: Ctrl-C reached it and it printed its own traceback).
"""

from __future__ import annotations

import _thread
import signal
import sys
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

INTERRUPTS = ("KeyboardInterrupt", "DagsterExecutionInterruptedError", "CancelledError")


def is_interrupt(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what caused it) is an interrupt rather than a failure."""
    seen = 0
    while exc is not None and seen < 10:
        if type(exc).__name__ in INTERRUPTS:
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _term(signum, frame) -> None:
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and handler is not _term:
        handler(signal.SIGINT, frame)  # Python's (KeyboardInterrupt), asyncio's or Dagster's: as Ctrl-C does
    else:
        raise KeyboardInterrupt


@contextmanager
def quiet_interrupts() -> Iterator[None]:
    """SIGTERM as Ctrl-C, and no traceback from a thread that an interrupt ended, for the block (main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous_term = signal.signal(signal.SIGTERM, _term)
    previous_hook = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is not None and (issubclass(args.exc_type, KeyboardInterrupt) or is_interrupt(args.exc_value)):
            return  # the main thread says "interrupted" once
        previous_hook(args)

    previous_unraisable = sys.unraisablehook

    def unraisable(args) -> None:
        # An interrupt raised by a signal handler while Python ran a finalizer or a weakref callback (a garbage
        # collection in the middle of a step) is "ignored": printed with a traceback and lost, so the step ran
        # on (an import waiting for a busy warehouse waited out its whole wait, then failed; CI, 5 Dec).
        # Deliver it again to the main thread instead, quietly, from another thread: raised here it would be
        # ignored again (this hook runs inside the same unraisable context).
        if args.exc_type is not None and (issubclass(args.exc_type, KeyboardInterrupt) or is_interrupt(args.exc_value)):
            threading.Timer(0.01, _thread.interrupt_main).start()
            return
        previous_unraisable(args)

    threading.excepthook = hook
    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        threading.excepthook = previous_hook
        sys.unraisablehook = previous_unraisable


def quiet_orphan_watchers() -> None:
    """Have Dagster start ``quiet_watch_orphans.py`` (deaf to Ctrl-C) instead of its own orphan watcher.

    Dagster's compute-log capture runs ``[python, watch_orphans.__file__, pid, tail_pid]`` for each step;
    only the file changes. Idempotent; called when a command is about to run Dagster in its process."""
    from dagster._core.execution import compute_logs

    script = str(Path(__file__).with_name("quiet_watch_orphans.py"))
    if getattr(compute_logs.watch_orphans, "__file__", None) != script:
        compute_logs.watch_orphans = types.SimpleNamespace(__file__=script)  # type: ignore[assignment]
