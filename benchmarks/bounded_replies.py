"""Benchmark: the orchestrator's peak memory against a hostile provider, before and after bounded replies.

    .venv/bin/python benchmarks/bounded_replies.py --before /work/main

Starts ``envduels serve-sim --hostile huge`` (every completion a 512 MB body, no Content-Length) and
``--hostile gzip-bomb`` (a ~1 MB gzip body inflating to 1 GiB), then, for each server and each client
path (the lean client, litellm), runs one ``Gateway.chat`` with 2 attempts in a fresh child process
whose ``PYTHONPATH`` is either this checkout (``after``) or the ``--before`` checkout, and prints the
child's peak RSS before the call (after imports) and after it, its wall time, and how the call ended.
The registry entry keeps the default ``max_reply_bytes`` (8 MiB).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from servers import sim_server

HERE = Path(__file__).resolve().parents[1]

CHILD = """
import asyncio, json, os, resource, sys, time
import envduels_dagster  # run from a directory outside both checkouts: PYTHONPATH's checkout is the one measured
assert envduels_dagster.__file__.startswith(os.environ["PYTHONPATH"]), envduels_dagster.__file__
from envduels_dagster.core.models import Gateway, RetryPolicy
from envduels_dagster.core.models.registry import load_registry
from envduels_dagster.core.models.litellm_backend import litellm_module

litellm_module()
gateway = Gateway(load_registry(sys.argv[1]), policy=RetryPolicy(max_attempts=2, base_delay_s=0.1))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
async def main():
    try:
        reply = await gateway.chat("m", [{"role": "user", "content": "hi"}], seed=0)
        return "reply of %d chars" % len(reply.text)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:160]
    finally:
        await gateway.aclose()
outcome = asyncio.run(main())
print(json.dumps({"rss_before_mb": before // 1024, "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                  "seconds": round(time.perf_counter() - t0, 1), "outcome": outcome}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", help="a checkout of the code before bounded replies (e.g. /work/main)")
    args = parser.parse_args()
    print(f"load: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    checkouts = [("after", HERE)] + ([("before", Path(args.before).resolve())] if args.before else [])
    with tempfile.TemporaryDirectory(prefix="envduels-bounded-") as tmp:
        for mode in ("huge", "gzip-bomb"):
            server = sim_server("--hostile", mode, checkout=HERE)
            base = server.base
            try:
                for client in ("fast", "litellm"):
                    registry = Path(tmp) / f"{mode}-{client}.yaml"
                    registry.write_text(f"models:\n  - name: m\n    model: openai/novice\n    api_base: {base}\n"
                                        f"    client: {client}\n")
                    for label, checkout in checkouts:
                        proc = subprocess.run([sys.executable, "-c", CHILD, str(registry)], capture_output=True,
                                              text=True, timeout=1800, cwd=tmp,
                                              env={**os.environ, "PYTHONPATH": str(checkout)})
                        lines = proc.stdout.strip().splitlines()
                        row = json.loads(lines[-1]) if proc.returncode == 0 and lines else \
                            {"outcome": f"exit {proc.returncode}: {proc.stderr.strip()[-200:]}"}
                        print(f"{mode:9s} {client:7s} {label:6s} " + " ".join(f"{k}={v}" for k, v in row.items()),
                              flush=True)
            finally:
                server.stop()


if __name__ == "__main__":
    main()
