"""Benchmark: several processes against one provider account, with and without the shared limiter (issue 31).

    .venv/bin/python benchmarks/provider_limits.py --processes 3 --calls 60 --rpm 600

Starts ``envduels serve-sim --rpm R`` (the account's limit, held by the server as a provider does: a
token bucket of one second's worth, 429 with Retry-After past it) and P worker processes that each make
K calls through ``Gateway`` to one registry entry with ``requests_per_minute: R`` (the lean client; the
pool, retries and limiter the pipeline's runs use). Two modes, one after the other on fresh servers:

* ``shared``: every process opens the same SQLite limiter file (what ``GatewayResource`` does beside the
  call cache), so the account's R holds across processes;
* ``per-run`` (the control): each process has its own in-memory limiter, as each run's gateway had
  before issue 31.

Prints, per mode: calls, the ideal wall time calls / R, the measured wall time (from a common start
instant to the last process done) and their ratio, and the 429s the server answered. Goal (issue 31):
``shared`` within 1.15x of calls / R with no 429.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from servers import sim_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

WORKER = """
import asyncio, json, sys, time
from envduels_dagster.core.models import Gateway, MemoryLimiter, RetryPolicy
from envduels_dagster.core.models.limits import SqliteLimiter
from envduels_dagster.core.models.registry import load_registry

registry_path, limiter_path, calls, start_at, index = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
if sys.argv[6] != "-":  # --headroom: the share of the limit the gateway schedules (issue 44: 1.0 before, 0.9 now)
    import envduels_dagster.core.models.gateway as gateway_module
    gateway_module.LIMIT_HEADROOM = float(sys.argv[6])
limiter = SqliteLimiter(limiter_path) if limiter_path != "-" else MemoryLimiter()
gateway = Gateway(load_registry(registry_path), policy=RetryPolicy(max_attempts=30, max_delay_s=5.0), limiter=limiter)
messages = [{"role": "user", "content": "Observation: I am thinking of an integer between 1 and 100. Guess it."}]

async def main():
    await asyncio.sleep(max(0.0, start_at - time.time()))
    replies = await asyncio.gather(*(gateway.chat("acct", messages, seed=1000 * index + i) for i in range(calls)))
    await gateway.aclose()
    return replies

replies = asyncio.run(main())
print(json.dumps({"done": time.time(), "retried_429": sum(r.retried_errors.count("rate_limit") for r in replies)}))
"""


def run_mode(mode: str, args, workdir: Path) -> dict:
    server = sim_server("--rpm", str(args.rpm), "--latency-ms", str(args.latency_ms), "--latency-sigma", "0.5")
    base = server.base
    try:
        registry = workdir / f"{mode}.yaml"
        registry.write_text(f"models:\n  - name: acct\n    model: openai/novice\n    api_base: {base}\n"
                            f"    client: fast\n    requests_per_minute: {args.rpm}\n    max_concurrency: 8\n")
        limiter = str(workdir / f"{mode}-limits.sqlite") if mode == "shared" else "-"
        start_at = time.time() + args.startup_s  # every worker has imported the package by then
        workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(registry), limiter, str(args.calls),
                                     repr(start_at), str(i), args.headroom or "-"], stdout=subprocess.PIPE, text=True,
                                    env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
                   for i in range(args.processes)]
        results = []
        for w in workers:
            out, _ = w.communicate(timeout=3600)
            if w.returncode != 0:
                raise SystemExit(f"a worker failed ({w.returncode})")
            results.append(json.loads(out.strip().splitlines()[-1]))
        with urllib.request.urlopen(base.removesuffix("/v1") + "/health", timeout=10) as resp:
            stats = json.loads(resp.read())
    finally:
        server.stop()
    calls = args.processes * args.calls
    ideal = calls / args.rpm * 60.0
    wall = max(r["done"] for r in results) - start_at
    return {"mode": mode, "headroom": args.headroom or "default", "calls": calls, "ideal_s": round(ideal, 2), "wall_s": round(wall, 2),
            "ratio": round(wall / ideal, 3), "server_429": stats["over_rpm"], "requests": stats["requests"],
            "retried_429": sum(r["retried_429"] for r in results)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--calls", type=int, default=60, help="calls per process")
    parser.add_argument("--rpm", type=float, default=600.0)
    parser.add_argument("--latency-ms", type=float, default=20.0, help="median server latency (lognormal, sigma 0.5)")
    parser.add_argument("--startup-s", type=float, default=8.0, help="time the workers get to start before t0")
    parser.add_argument("--modes", nargs="+", default=["shared", "per-run"])
    parser.add_argument("--headroom", default=None, help="override gateway.LIMIT_HEADROOM (1.0: schedule at the "
                        "registry's limit exactly, as before issue 44)")
    args = parser.parse_args()
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="envduels-limits-") as tmp:
        for mode in args.modes:
            row = run_mode(mode, args, Path(tmp))
            print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
