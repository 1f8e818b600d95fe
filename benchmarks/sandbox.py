"""Benchmark the confined worker: median start time and median per-step round trip.

Run: .venv/bin/python benchmarks/sandbox.py [--starts N] [--steps N]

"start" is the wall time of ``SandboxedEnv.start()``: spawn the interpreter, confine
(preload the curated stdlib, new network namespace, drop to a throwaway uid, rlimits),
then load a small environment class. "step" is one ``step()`` request/reply over the
JSON-lines pipe. The baseline line is a bare ``python -I -S -B -c pass`` for scale.
Goal (issue 2): start <= 50 ms, step <= 0.3 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envduels_dagster.core.sandbox import SandboxedEnv, SandboxLimits  # noqa: E402

SOURCE = '''
class Counter:
    def __init__(self, max_turns=10):
        self.max_turns = max_turns

    def reset(self, seed):
        self.n = seed
        return f"count {self.n}", {}

    def step(self, action):
        self.n += 1
        return f"count {self.n}", 0.0, False, False, {}
'''


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def baseline_ms(reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-S", "-B", "-c", "pass"], check=True, env={})
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def measure(starts: int, steps: int) -> tuple[list[float], list[float], dict, float]:
    """Returns start times, step times (ms), the isolation applied, and worker CPU ms per start."""
    limits = SandboxLimits()
    start_ms: list[float] = []
    step_ms: list[float] = []
    applied: dict = {}
    cpu0 = children_cpu_s()
    for _ in range(starts):
        env = SandboxedEnv(SOURCE, "Counter", 10, limits)
        t0 = time.perf_counter()
        await env.start()
        start_ms.append((time.perf_counter() - t0) * 1000)
        applied = env.applied
        await env.close()
    cpu_ms = (children_cpu_s() - cpu0) * 1000 / starts  # reaped workers only: CPU is load-independent-ish
    async with SandboxedEnv(SOURCE, "Counter", 10, limits) as env:
        await env.reset(0)
        for _ in range(200):  # warm-up
            await env.step("\\boxed{go}")
        for _ in range(steps):
            t0 = time.perf_counter()
            await env.step("\\boxed{go}")
            step_ms.append((time.perf_counter() - t0) * 1000)
    return start_ms, step_ms, applied, cpu_ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=40)
    parser.add_argument("--steps", type=int, default=5000)
    args = parser.parse_args()

    start_ms, step_ms, applied, cpu_ms = asyncio.run(measure(args.starts, args.steps))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: nproc={os.cpu_count()} cpu={cpu_model()!r} python={platform.python_version()} "
          f"load1={load:.2f}")
    print(f"isolation: network_isolated={applied.get('network_isolated')} uid={applied.get('uid')}")
    print(f"baseline python -I -S startup: median {baseline_ms(10):.1f} ms")
    q = statistics.quantiles
    print(f"worker start (spawn+confine+load): median {statistics.median(start_ms):.1f} ms "
          f"(p10 {q(start_ms, n=10)[0]:.1f}, p90 {q(start_ms, n=10)[-1]:.1f}; n={len(start_ms)})  goal <= 50 ms")
    print(f"worker CPU per start (user+sys): {cpu_ms:.1f} ms")
    print(f"step round trip: median {statistics.median(step_ms):.3f} ms "
          f"(p10 {q(step_ms, n=10)[0]:.3f}, p90 {q(step_ms, n=10)[-1]:.3f}; n={len(step_ms)})  goal <= 0.3 ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
