"""Benchmark: how long loading the code location takes in a fresh interpreter (median of N runs).

    .venv/bin/python benchmarks/import_time.py [--runs 5]

Why it matters: the webserver, the daemon and every run's step process load the definitions;
a slow load is paid on every reload and every step that is not forked from a preloaded server.
Three figures per run, each in a new ``python`` process (so nothing is cached in memory):

* ``import``: ``import envduels_dagster.definitions`` (what the module costs; ``defs`` is lazy);
* ``load``: import + ``defs()`` + resolving the asset graph (what ``dagster dev`` does);
* ``baseline``: ``import dagster`` alone, the floor any Dagster code location pays.

The 1-minute load average is printed with the figures: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROBES = {
    "baseline": "import time; t = time.perf_counter(); import dagster; print(time.perf_counter() - t)",
    "import": ("import time; t = time.perf_counter(); import envduels_dagster.definitions; "
               "print(time.perf_counter() - t)"),
    "load": ("import time; t = time.perf_counter(); import envduels_dagster.definitions as d; "
             "d.defs().resolve_asset_graph(); print(time.perf_counter() - t)"),
}


def measure(code: str) -> float:
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from envduels_dagster.assets.marts.project import prepare_manifest

    prepare_manifest()  # loading needs the dbt manifest; prepare it outside the timed runs
    measure(PROBES["load"])  # warm the OS file cache once, untimed
    for name, code in PROBES.items():
        times = [measure(code) for _ in range(args.runs)]
        print(f"{name:>8}: median {statistics.median(times):.2f} s over {args.runs} runs "
              f"(min {min(times):.2f}, max {max(times):.2f})  loadavg {os.getloadavg()[0]:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
