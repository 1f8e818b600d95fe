"""The server the HTTP benchmarks measure against: `envduels serve-sim`, started by one helper.

    from servers import sim_server   # a benchmark runs as `python benchmarks/<name>.py`: this folder is on sys.path

    server = sim_server("--latency-ms", "50")        # 127.0.0.1, a port the OS picks
    try:
        ... server.base ...                          # http://127.0.0.1:<port>/v1
    finally:
        server.stop()

The process is ``tests.helpers.sim_server.SimServerProcess``, the one the tests start, so a benchmark and the test
of the same behaviour talk to a server started the same way. ``checkout`` runs the server from that checkout's
package (PYTHONPATH), for a benchmark that compares two checkouts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # `tests.helpers` lives in the checkout, not in the installed package
    sys.path.insert(0, str(REPO))

from tests.helpers.sim_server import SimServerProcess, health  # noqa: E402

__all__ = ["SimServerProcess", "health", "sim_server"]


def sim_server(*args: str, checkout: Path | None = None) -> SimServerProcess:
    """``envduels serve-sim --port 0 *args``, running; ``stop()`` it when done. Fails with the server's own
    message (RuntimeError) when it does not start."""
    env = None if checkout is None else {**os.environ, "PYTHONPATH": str(checkout)}
    return SimServerProcess(*args, env=env)
