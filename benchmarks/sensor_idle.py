"""Benchmark: what the request sensor's tick interval costs when nothing is to be done.

    .venv/bin/python benchmarks/sensor_idle.py [--intervals 30,1] [--window 120] [--dagster-yaml dagster.yaml]

A fresh ENVDUELS_HOME with 3 simulated models (2 environments per author, 1 seed) runs its request to the
end through ``dagster dev`` (webserver + daemon), so that afterwards the sensor finds nothing to do. Then,
for each interval (``ENVDUELS_SENSOR_INTERVAL_S``), ``dagster dev`` is restarted on the same home, left
``--settle`` seconds to start, and the CPU of its whole process tree is sampled over ``--window`` seconds
(``scale_daemon.TreeSampler``), with the number of request-sensor ticks in the window. Printed: CPU
seconds per minute of idling and per tick. No browser is open (the webserver only answers health checks).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    import dagster as dg

    from benchmarks.scale import names, write_registry
    from benchmarks.scale_daemon import TreeSampler, request_tick_times
    from tests.helpers.daemon import DagsterDev, live_env, wait_until_settled

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--intervals", default="30,1", help="ENVDUELS_SENSOR_INTERVAL_S values to compare")
    parser.add_argument("--window", type=float, default=120.0, help="seconds of idling sampled per interval")
    parser.add_argument("--settle", type=float, default=30.0, help="seconds after start before sampling")
    parser.add_argument("--dagster-yaml", type=Path, default=REPO / "dagster.yaml")
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="envduels-idle-"))
    registry = home / "models.yaml"
    write_registry(registry, names(3))
    (home / "dagster").mkdir()
    shutil.copy(args.dagster_yaml, home / "dagster" / "dagster.yaml")
    base = dict(ENVDUELS_ENVS_PER_AUTHOR="2", ENVDUELS_SEEDS="1", ENVDUELS_TRAINING_ADMISSION="rule")
    print(f"machine: nproc={os.cpu_count()} loadavg={os.getloadavg()[0]:.2f}; home {home}", flush=True)

    env = live_env(home, registry, ENVDUELS_SENSOR_INTERVAL_S="2", **base)
    dev = DagsterDev(env, home / "dagster-dev-request.log")
    os.environ["DAGSTER_HOME"] = env["DAGSTER_HOME"]
    try:
        dev.wait_ready()
        with dg.DagsterInstance.get() as instance:
            wait_until_settled(instance, time.time() - 5, quiet_s=30, timeout_s=1800)
    finally:
        dev.stop()

    for interval in args.intervals.split(","):
        env = live_env(home, registry, ENVDUELS_SENSOR_INTERVAL_S=interval, **base)
        dev = DagsterDev(env, home / f"dagster-dev-{interval}.log")
        try:
            dev.wait_ready()
            time.sleep(args.settle)
            sampler = TreeSampler(dev.proc.pid).start()
            t0 = time.time()
            time.sleep(args.window)
            t1 = time.time()
            sampler.stop()
            cpu = sampler.samples[-1][1] - sampler.samples[0][1]
            with dg.DagsterInstance.get() as instance:
                ticks = len(request_tick_times(instance, t0, t1))
                runs = [r for r in instance.get_runs() if instance.get_run_record_by_id(r.run_id).create_timestamp.timestamp() >= t0]
        finally:
            dev.stop()
        print(json.dumps({"interval_s": int(interval), "window_s": round(t1 - t0, 1), "ticks": ticks,
                          "runs_launched": len(runs), "cpu_s": round(cpu, 2),
                          "cpu_s_per_minute": round(cpu * 60 / (t1 - t0), 2),
                          "loadavg": round(os.getloadavg()[0], 2)}), flush=True)


if __name__ == "__main__":
    main()
