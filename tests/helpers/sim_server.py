"""`envduels serve-sim` in a subprocess on 127.0.0.1 (the OS picks the port), for tests and benchmarks alike.

``SimServerProcess(*args)`` starts ``python -m envduels_dagster.cli serve-sim --port 0 *args`` and reads the base URL
from its first line; ``stop()`` ends it (SIGTERM, then SIGKILL). ``health(server)`` reads its counters (``/health``:
calls, 429s, the most requests in flight, the last request's options). ``MESSAGES`` is a question every simulated
model answers; ``thinker_registry`` a registry of one priced model on a server.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request

MESSAGES = [{"role": "system", "content": "x"},
            {"role": "user", "content": "Observation: I am thinking of an integer between 1 and 100. Guess it."}]


class SimServerProcess:
    """A running serve-sim; ``base`` is its ``http://127.0.0.1:<port>/v1``. ``env`` replaces the child's
    environment (a benchmark points PYTHONPATH at the checkout it measures)."""

    def __init__(self, *args: str, env: dict[str, str] | None = None):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "envduels_dagster.cli", "serve-sim", "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/v1", line)
        if not match:
            self.proc.kill()
            _, err = self.proc.communicate(timeout=10)
            raise RuntimeError(f"serve-sim {' '.join(args)} did not start: its first line was {line!r}; "
                               f"stderr: {err.strip()[-2000:]!r}")
        self.base = f"http://127.0.0.1:{match.group(1)}/v1"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> str:
        """SIGTERM (the server's clean stop); SIGKILL if it has not exited 10 s later (a machine under load)."""
        self.proc.terminate()
        try:
            out, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate(timeout=10)
        return out + err

    def __enter__(self) -> SimServerProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def health(srv: SimServerProcess, timeout: float = 10) -> dict:
    """The server's counters (``GET /health``)."""
    with urllib.request.urlopen(srv.base.removesuffix("/v1") + "/health", timeout=timeout) as resp:
        return json.loads(resp.read())


def thinker_registry(tmp_path, base: str, client: str, extra: str = ""):
    """A loaded registry of one priced model, ``thinker``, served at ``base`` through ``client`` (fast or litellm);
    ``extra`` adds entry lines (max_tokens, params, timeout_s ...)."""
    from envduels_dagster.core.models.registry import load_registry

    path = tmp_path / "models.yaml"
    path.write_text(f"""models:
  - name: thinker
    model: openai/novice
    api_base: {base}
    client: {client}
    input_cost_per_mtok: 1
    output_cost_per_mtok: 4
    reasoning_cost_per_mtok: 10
{extra}""")
    return load_registry(path)
