"""Benchmark (issue 35): where a demo process spends its CPU, event-log writes first, before and after.

    .venv/bin/pip install py-spy   # not a dependency
    .venv/bin/python benchmarks/event_log_share.py --models 3 --envs 3 --seeds 2 \\
        --source before=/tmp/base-checkout --source after=.

Runs ``envduels demo`` (the whole pipeline through Dagster, in-process runs on a fresh SQLite instance)
once per ``--source`` (a checkout put first on PYTHONPATH, so two versions run side by side with one
environment), each under ``py-spy record`` (100 Hz, active samples only, so shares are shares of CPU),
then reads the collapsed stacks and prints, per source: wall and CPU seconds, runs and events in the
instance, and the share of samples in Dagster's event writes (``store_event``), in the
great-expectations checks, in the pandas first pass, in ``duckdb.connect`` and in the schema check
(``_ensure_schema``), and in playing episodes (``play_episode``).

``--source label=checkout:dagster.yaml`` runs that source on an instance configured by that file (put
in the demo's DAGSTER_HOME before it starts), so two instance configurations compare on one code:

    .venv/bin/python benchmarks/event_log_share.py --models 3 --envs 2 --seeds 1 \
        --source before=.:/tmp/dagster-main.yaml --source after=.:dagster.yaml
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CATEGORIES = {  # label -> substrings, any of which in a stack puts the sample in the category
    "event writes (store_event)": ["store_event ("],
    "great_expectations": ["great_expectations/"],
    "pandas first pass (checks)": ["fast_rules.py"],
    "duckdb.connect": ["connect (duckdb", "get_connection (dagster_duckdb"],
    "schema check (_ensure_schema)": ["_ensure_schema ("],
    "dbt (marts)": ["dbt_marts (", "with_table_metadata ("],
    "play (play_episode)": ["play_episode ("],
}

COUNT = r'''
import collections
import dagster as dg
with dg.DagsterInstance.get() as instance:
    runs = instance.get_runs()
    kinds = collections.Counter()
    for r in runs:
        for e in instance.all_logs(r.run_id):
            kinds[e.dagster_event.event_type_value if e.dagster_event else "log line"] += 1
    print(" ".join(f"{k}={v}" for k, v in kinds.most_common()))
    print(len(runs), sum(kinds.values()))
'''


def registry(path: Path, models: int) -> Path:
    profiles = ["oracle", "expert", "novice", "journeyman", "apprentice"]
    path.write_text("models:\n" + "".join(f"  - name: {p}\n    model: envduels-sim/{p}\n" for p in profiles[:models]))
    return path


def run(label: str, source: Path, args, yaml: Path | None = None) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"envduels-eventlog-{label}-"))
    if yaml is not None:  # the demo keeps a dagster.yaml it finds in its DAGSTER_HOME
        (work / "home" / "dagster").mkdir(parents=True)
        shutil.copy(yaml, work / "home" / "dagster" / "dagster.yaml")
    env = {**os.environ, "PYTHONPATH": str(source.resolve()), "ENVDUELS_HOME": str(work / "home"),
           "ENVDUELS_REGISTRY": str(registry(work / "models.yaml", args.models)),
           "ENVDUELS_ENVS_PER_AUTHOR": str(args.envs), "ENVDUELS_SEEDS": str(args.seeds)}
    env.pop("DAGSTER_HOME", None)
    py_spy = Path(sys.executable).with_name("py-spy")
    stacks = work / "stacks.txt"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run([str(py_spy), "record", "-r", "100", "--format", "raw", "-o", str(stacks), "--",
                           sys.executable, "-m", "envduels_dagster.cli", "demo"],
                          cwd=work, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{label}: demo failed\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    env["DAGSTER_HOME"] = str(work / "home" / "dagster")
    counted = subprocess.run([sys.executable, "-c", COUNT], env=env, capture_output=True, text=True, cwd=work)
    runs, events = counted.stdout.split()[-2:] if counted.returncode == 0 else ("?", "?")
    kinds = counted.stdout.splitlines()[-2] if counted.returncode == 0 else counted.stderr[-500:]
    total, by = 0, dict.fromkeys(CATEGORIES, 0)
    for line in stacks.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        total += int(n)
        for cat, needles in CATEGORIES.items():
            if any(x in stack for x in needles):
                by[cat] += int(n)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"label": label, "wall": wall, "cpu": cpu, "load": load, "runs": runs, "events": events, "kinds": kinds,
            "samples": total, "shares": {k: v / max(1, total) for k, v in by.items()}}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=3)
    parser.add_argument("--envs", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--source", action="append", required=True, help="label=checkout directory")
    args = parser.parse_args()
    results = []
    for spec in args.source:
        label, _, path = spec.partition("=")
        path, _, yaml = path.partition(":")
        results.append(run(label, Path(path), args, Path(yaml).resolve() if yaml else None))
        r = results[-1]
        print(f"{r['label']}: wall_s={r['wall']:.1f} cpu_s(demo + children)={r['cpu']:.1f} runs={r['runs']} "
              f"events={r['events']} samples={r['samples']} load1_at_start={r['load']:.1f} "
              f"load1_at_end={os.getloadavg()[0]:.1f}", flush=True)
        print(f"    events by type: {r['kinds']}", flush=True)
        for cat, share in r["shares"].items():
            print(f"    {cat:32s} {100 * share:5.1f}% of the demo process's CPU samples", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
