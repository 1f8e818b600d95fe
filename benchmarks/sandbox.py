"""Benchmark the confined worker: median start time and median per-step round trip.

Run: .venv/bin/python benchmarks/sandbox.py [--starts N] [--steps N] [--modes fork,exec,bwrap]

"start" is the wall time of ``SandboxedEnv.start()``: get a confined worker (forked from
the fork server, or a fresh interpreter), confine it (network/IPC/mount namespaces,
read-only host, private tmpfs workdir, throwaway uid, rlimits, seccomp), then load a
small environment class. "step" is one ``step()`` request/reply over the JSON-lines
pipes. Modes: ``fork`` (the default: workers forked from the fork server; its own
one-time start is reported apart), ``exec`` (``SandboxLimits(fork_server=False)``: a
fresh interpreter per worker) and ``bwrap`` (``SandboxLimits(wrapper="bwrap")``, when
bubblewrap is installed); ``fork+stdlib`` is ``fork`` with a game that imports
statistics and fractions (from the worker's view of the standard library).
The baseline line is a bare ``python -I -S -B -c pass``.
Goals: start <= 15 ms median with the default layers (issue 20; 50 ms in issue 2), step <= 0.3 ms.
Figures, machine and date: docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envduels_dagster.core.sandbox import (  # noqa: E402
    SandboxedEnv,
    SandboxLimits,
    fork_server_pid,
    shutdown_fork_server,
)

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

# The same game written as models write it (issue 21): its imports come from the worker's
# read-only view of the standard library, not from the fork server's preloaded modules.
STDLIB_SOURCE = "from __future__ import annotations\nimport statistics\nfrom fractions import Fraction\n" + SOURCE

MODES = {
    "fork": SandboxLimits(),
    "fork+stdlib": SandboxLimits(),
    "exec": SandboxLimits(fork_server=False),
    "bwrap": SandboxLimits(wrapper="bwrap"),
}


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


def workers_cpu_s() -> float:
    """CPU of reaped workers: our own children, plus the fork server's (it reaps its children)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = usage.ru_utime + usage.ru_stime
    pid = fork_server_pid()
    if pid is not None:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")  # cutime + cstime
    return total


async def measure(limits: SandboxLimits, starts: int, steps: int, source: str = SOURCE) -> dict:
    result: dict = {"start_ms": [], "step_ms": []}
    t0 = time.perf_counter()
    async with SandboxedEnv(SOURCE, "Counter", 10, limits) as env:  # warm-up; starts the fork server
        result["first_ms"] = (time.perf_counter() - t0) * 1000
        result["applied"] = env.applied
    cpu0 = workers_cpu_s()
    for _ in range(starts):
        env = SandboxedEnv(source, "Counter", 10, limits)
        t0 = time.perf_counter()
        await env.start()
        result["start_ms"].append((time.perf_counter() - t0) * 1000)
        await env.close()
    result["cpu_ms"] = (workers_cpu_s() - cpu0) * 1000 / starts
    async with SandboxedEnv(SOURCE, "Counter", 10, limits) as env:
        await env.reset(0)
        for _ in range(200):  # warm-up
            await env.step("\\boxed{go}")
        for _ in range(steps):
            t0 = time.perf_counter()
            await env.step("\\boxed{go}")
            result["step_ms"].append((time.perf_counter() - t0) * 1000)
    return result


def spread(xs: list[float], digits: int) -> str:
    q = statistics.quantiles(xs, n=10)
    return f"median {statistics.median(xs):.{digits}f} (p10 {q[0]:.{digits}f}, p90 {q[-1]:.{digits}f}; n={len(xs)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=40)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--modes", default="fork,fork+stdlib,exec,bwrap")
    args = parser.parse_args()

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: nproc={os.cpu_count()} cpu={cpu_model()!r} python={platform.python_version()} "
          f"load1={load:.2f}")
    print(f"baseline python -I -S startup: median {baseline_ms(10):.1f} ms")
    for mode in args.modes.split(","):
        if mode == "bwrap" and shutil.which("bwrap") is None:
            print("bwrap: skipped (bubblewrap is not installed: apt-get install -y bubblewrap)")
            continue
        source = STDLIB_SOURCE if mode.endswith("+stdlib") else SOURCE
        r = asyncio.run(measure(MODES[mode], args.starts, args.steps, source))
        a = r["applied"]
        print(f"[{mode}] isolation: network={a.get('network_isolated')} filesystem={a.get('filesystem_isolated')} "
              f"uid={a.get('uid')} seccomp={a.get('seccomp')} stdlib={a.get('stdlib')} "
              f"pid_ns={a.get('pid_isolated')} narrowed={a.get('filesystem_narrowed')} "
              f"ipc_limits={a.get('ipc_limits')} cgroup={a.get('cgroup')}")
        if mode == "fork":
            print(f"[{mode}] first start (includes starting the fork server): {r['first_ms']:.1f} ms")
        print(f"[{mode}] worker start (spawn+confine+load): {spread(r['start_ms'], 1)} ms  goal <= 15 ms")
        if mode != "bwrap":  # bubblewrap's own init reaps the worker: its CPU is not accounted to us
            print(f"[{mode}] worker CPU per start (user+sys): {r['cpu_ms']:.1f} ms")
        print(f"[{mode}] step round trip: {spread(r['step_ms'], 3)} ms  goal <= 0.3 ms")
    shutdown_fork_server()
    return 0


if __name__ == "__main__":
    sys.exit(main())
