"""Benchmark: a simulated registry end to end through the real daemon, one run per pair vs batched runs.

    .venv/bin/python benchmarks/scale.py --daemon [--models 30] [--pairs-per-run 1,100] [--rounds 0] [--pairs-only]

For each batch size: a fresh ENVDUELS_HOME and DAGSTER_HOME holding only the registry; ``dagster dev``
(webserver + daemon, the shipped dagster.yaml: 3 runs at once, 2 per provider); the request sensor
finds every model new and runs the request (authors, pairs, marts, learners, studies). When nothing
has run for a while, the figures of the pair stage are read from the instance:

* wall W: the last author run's end to the last pair run's end (the sensor's tick, the queue, every
  pair run's launch, imports, play, checks and event writes);
* compute: C_play, the pairs' own play-and-write time (each materialization's ``seconds``), and
  C_steps, the pair runs' step durations (the pair asset and its great-expectations checks);
* C_checks, the great-expectations suites' own validation time (``suite_seconds``);
* overhead per pair: (W - (C_play + C_checks) / cores) / pairs, the wall time a pair costs beyond
  its share of ideal parallel work; and the ratio W / ((C_play + C_checks) / cores) (goal: <= 1.3).
  The same against C_steps is printed too; step durations also hold each run process's lazy
  imports (pandas, great-expectations), which batching pays once per run instead of once per pair.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CORES = 2


def _instance_figures(instance, since: float, runs) -> dict:
    import dagster as dg

    pair_runs = [r for r in runs if r.job_name == "pair_job"]
    author_runs = [r for r in runs if r.job_name == "author_job"]
    if not pair_runs:
        return {"error": "no pair runs"}
    authors_end = max((r.ended or r.created) for r in author_runs) if author_runs else min(r.created for r in pair_runs)
    pairs_end = max((r.ended or r.created) for r in pair_runs)
    records = instance.fetch_materializations(dg.AssetKey("duel_episodes"), limit=10000).records
    mats = [r for r in records if r.timestamp >= since]
    c_play = sum(float(r.asset_materialization.metadata["seconds"].value) for r in mats
                 if "seconds" in r.asset_materialization.metadata)
    c_steps = 0.0
    for r in pair_runs:
        for step in instance.get_run_step_stats(r.run_id):
            if step.start_time and step.end_time:
                c_steps += step.end_time - step.start_time
    c_checks = 0.0  # great-expectations validation: one suite per pair (each check of it carries the time)
    for r in pair_runs:
        suites = {}
        for e in instance.all_logs(r.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
            data = e.dagster_event.event_specific_data
            if "suite_seconds" in data.metadata:
                suites[str(data.partition)] = float(data.metadata["suite_seconds"].value)
        c_checks += sum(suites.values())
    run_walls = [(r.ended - r.created) for r in pair_runs if r.ended]
    n_pairs = len({str(r.partition_key) for r in mats})
    wall = pairs_end - authors_end
    return {
        "pair_runs": len(pair_runs), "pairs": n_pairs, "materializations": len(mats),
        "failed_runs": sum(r.status == "FAILURE" for r in runs),
        "pair_stage_wall_s": round(wall, 1), "compute_play_s": round(c_play, 1),
        "compute_checks_s": round(c_checks, 1), "compute_steps_s": round(c_steps, 1),
        # work = play + validation; steps = step durations (they also hold each process's lazy imports)
        "overhead_per_pair_s": round((wall - (c_play + c_checks) / CORES) / max(1, n_pairs), 3),
        "overhead_per_pair_vs_steps_s": round((wall - c_steps / CORES) / max(1, n_pairs), 3),
        "wall_over_work_per_core": round(wall / max(1e-9, (c_play + c_checks) / CORES), 2),
        "wall_over_steps_per_core": round(wall / max(1e-9, c_steps / CORES), 2),
        "mean_run_wall_s": round(sum(run_walls) / max(1, len(run_walls)), 1),
        "end_to_end_s": round(max((r.ended or r.created) for r in runs) - since, 1),
    }


def figures_from_home(home: Path) -> dict:
    """The figures again, from a finished run's kept DAGSTER_HOME."""
    import dagster as dg

    from tests.helpers.daemon import _runs_since

    old = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(home / "dagster")
    try:
        with dg.DagsterInstance.get() as instance:
            runs = _runs_since(instance, 0)
            return _instance_figures(instance, min(r.created for r in runs) - 1, runs)
    finally:
        if old is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = old


def _wait_for_pair_stage(instance, since: float, timeout_s: float) -> bool:
    """Until the request moved past its pair stage (a downstream run exists, no pair run is active)."""
    from tests.helpers.daemon import ACTIVE, _runs_since

    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        runs = _runs_since(instance, since)
        if any(r.job_name == "downstream_job" for r in runs) and not any(
                r.status in ACTIVE for r in runs if r.job_name == "pair_job"):
            return True
        time.sleep(3)
    return False


def daemon_flow(models: list[str], pairs_per_run: int, rounds: int = 0, envs_per_author: int = 3,
                timeout_s: float = 3600, keep: Path | None = None, pairs_only: bool = False) -> dict:
    import dagster as dg

    from benchmarks.scale import write_registry
    from tests.helpers.daemon import DagsterDev, _runs_since, live_env, wait_until_settled

    home = keep or Path(tempfile.mkdtemp(prefix=f"envduels-daemon-{len(models)}-{pairs_per_run}-"))
    home.mkdir(parents=True, exist_ok=True)
    registry = home / "models.yaml"
    write_registry(registry, models)
    env = live_env(home, registry, ENVDUELS_ENVS_PER_AUTHOR=str(envs_per_author), ENVDUELS_SEEDS="4",
                   ENVDUELS_SENSOR_INTERVAL_S="5", ENVDUELS_TRAINING_ADMISSION="rule", ENVDUELS_PAIRS_PER_RUN=str(pairs_per_run),
                   ENVDUELS_ROUNDS=str(rounds))
    (home / "dagster").mkdir(exist_ok=True)
    shutil.copy(REPO / "dagster.yaml", home / "dagster" / "dagster.yaml")
    load0 = os.getloadavg()
    since = time.time()
    dev = DagsterDev(env, home / "dagster-dev.log")
    old = os.environ.get("DAGSTER_HOME")
    try:
        dev.wait_ready()
        os.environ["DAGSTER_HOME"] = env["DAGSTER_HOME"]
        with dg.DagsterInstance.get() as instance:
            if pairs_only:  # the pair stage's figures only: stop once the request moved past it
                settled = _wait_for_pair_stage(instance, since, timeout_s)
            else:
                _, settled = wait_until_settled(instance, since, quiet_s=45, timeout_s=timeout_s)
            runs = _runs_since(instance, since)
            out = {"models": len(models), "pairs_per_run_max": pairs_per_run, "rounds": rounds,
                   "envs_per_author": envs_per_author, "settled": settled, "runs": len(runs),
                   **_instance_figures(instance, since, runs)}
    finally:
        dev.stop()
        if old is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = old
    out["loadavg_before_after"] = [round(load0[0], 2), round(os.getloadavg()[0], 2)]
    out["home"] = str(home)
    print(json.dumps(out), flush=True)
    return out
