"""Benchmark: several run processes against one provider that limits calls in flight (issue 45).

    .venv/bin/python benchmarks/in_flight.py --processes 3 --calls 16 --limit 4 --latency-ms 250 --repeat 3

Starts ``envduels serve-sim --max-in-flight N --latency-ms L`` (the account's limit: it counts the calls in
flight and answers 429 past N) and P run processes (``tests/helpers/in_flight_run.py``: a gateway opened as
a run opens it, its limiter and in-flight queue beside the call cache; one call each to warm up, then K at
once on a common "go"). Modes, interleaved per repeat, each on a fresh server and a fresh home:

* ``shared``: every process's registry entry sets ``max_in_flight: N`` (the queue in the shared SQLite file);
* ``per-run`` (the control): ``max_concurrency: N`` instead, a semaphore in each process's gateway, as
  ``max_in_flight`` was held before issue 45.

Prints per run: the most calls in flight the server saw, its 429s, the wall from "go" to the last reply
against the ideal P x K x L / N, and the mean calls in flight over that wall (the limit kept full: N).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from servers import health, sim_server

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def one(mode: str, args) -> dict:
    srv = sim_server("--latency-ms", str(args.latency_ms), "--max-in-flight", str(args.limit))
    home = Path(tempfile.mkdtemp(prefix="envduels-in-flight-"))
    key = "max_in_flight" if mode == "shared" else "max_concurrency"
    registry = home / "models.yaml"
    registry.write_text(f"models:\n  - name: remote\n    model: openai/novice\n    api_base: {srv.base}\n"
                        f"    client: fast\n    {key}: {args.limit}\n")
    procs = []
    try:
        for i in range(args.processes):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "tests.helpers.in_flight_run", str(registry), str(home / "cache" / "calls.sqlite"),
                 str(args.calls), str(1000 * i)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        for p in procs:
            p.stdout.readline()
        before, t0 = health(srv, timeout=30), time.time()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [json.loads(p.communicate(timeout=600)[0]) for p in procs]
        after = health(srv, timeout=30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        srv.stop()
    wall = max(r["done_at"] for r in results) - t0
    ideal = args.processes * args.calls * args.latency_ms / 1000 / args.limit
    return {"mode": mode, "max_in_flight_seen": after["max_in_flight"], "429s": after["over_in_flight"],
            "failed_calls": sum(len(r["errors"]) for r in results), "wall_s": round(wall, 2),
            "ideal_s": round(ideal, 2), "ratio": round(wall / ideal, 3),
            "mean_in_flight": round((after["in_flight_s"] - before["in_flight_s"]) / wall, 2),
            "load": round(os.getloadavg()[0], 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--calls", type=int, default=16)
    parser.add_argument("--limit", type=int, default=4)
    parser.add_argument("--latency-ms", type=float, default=250.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--modes", default="shared,per-run")
    args = parser.parse_args()
    for _ in range(args.repeat):
        for mode in args.modes.split(","):
            print(json.dumps(one(mode, args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
