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
* CPU and peak memory of the whole ``dagster dev`` process tree (webserver, daemon, code servers, run
  workers, sandbox workers), sampled from /proc every half second (:class:`TreeSampler`): CPU over the
  pair stage's window and over the whole request, and the peak of the tree's summed RSS.

Since pairs of a ranged run play at once (issue 35), a pair's ``seconds`` is its wall inside the run,
overlapping the others'; C_play then over-counts the work. ``--work-per-pair S`` states the work per
pair measured where pairs do not overlap (one pair per run) so every batching's ratio is taken against
the same work: W / (pairs x S / cores) (``wall_over_stated_work``).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CORES = 2
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


class TreeSampler:
    """CPU seconds and RSS of a process and all its descendants, sampled every ``interval`` seconds.

    CPU at a sample is the sum over the tree's live processes of their own and their reaped children's
    time (utime + stime + cutime + cstime): a finished run worker's CPU moves into its parent's cutime,
    so it is still counted. Lost: a process's last < ``interval`` seconds if it is orphaned, and CPU of
    processes reparented outside the tree.
    """

    def __init__(self, root: int, interval: float = 0.5):
        self.root, self.interval = root, interval
        self.samples: list[tuple[float, float, int]] = []  # (epoch s, cpu s, rss bytes)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> TreeSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def sample(self) -> tuple[float, float, int]:
        procs: dict[int, tuple[int, float, int]] = {}  # pid -> (ppid, cpu s, rss bytes)
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "; fields[0] is the state
            ppid, cpu = int(fields[1]), sum(int(x) for x in fields[11:15]) / TICK
            procs[int(entry)] = (ppid, cpu, int(fields[21]) * PAGE)
        tree, frontier = {self.root}, [self.root]
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in procs.items():
            children.setdefault(ppid, []).append(pid)
        while frontier:
            for child in children.get(frontier.pop(), []):
                if child not in tree:
                    tree.add(child)
                    frontier.append(child)
        live = [procs[p] for p in tree if p in procs]
        return time.time(), sum(c for _, c, _ in live), sum(r for _, _, r in live)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self.sample())
            self._stop.wait(self.interval)

    def window(self, t0: float, t1: float) -> dict:
        """CPU seconds between the samples nearest ``t0`` and ``t1``, and the peak RSS between them."""
        if not self.samples:
            return {}
        inside = [s for s in self.samples if t0 <= s[0] <= t1] or [min(self.samples, key=lambda s: abs(s[0] - t1))]
        first = min(self.samples, key=lambda s: abs(s[0] - t0))
        last = min(self.samples, key=lambda s: abs(s[0] - t1))
        return {"cpu_s": round(max(0.0, last[1] - first[1]), 1),
                "peak_rss_mb": round(max(s[2] for s in inside) / 2**20)}


def _instance_figures(instance, since: float, runs, sampler: TreeSampler | None = None,
                      work_per_pair: float | None = None) -> dict:
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
    tree = {}
    if sampler is not None:
        stage, whole = sampler.window(authors_end, pairs_end), sampler.window(since, max((r.ended or r.created) for r in runs))
        tree = {"pair_stage_cpu_s": stage.get("cpu_s"), "pair_stage_peak_rss_mb": stage.get("peak_rss_mb"),
                "pair_stage_cpu_per_pair_s": round(stage.get("cpu_s", 0) / max(1, n_pairs), 3),
                "request_cpu_s": whole.get("cpu_s"), "request_peak_rss_mb": whole.get("peak_rss_mb")}
    if work_per_pair:
        ideal = n_pairs * work_per_pair / CORES
        tree |= {"stated_work_per_pair_s": work_per_pair,
                 "wall_over_stated_work": round(wall / max(1e-9, ideal), 2),
                 "overhead_per_pair_vs_stated_work_s": round((wall - ideal) / max(1, n_pairs), 3)}
    return {
        **tree,
        "play_per_pair_s": round(c_play / max(1, n_pairs), 3),
        "checks_per_pair_s": round(c_checks / max(1, n_pairs), 3),
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
        # the stage's start: the last author run's end to the first pair run's creation (the sensor's tick)
        "sensor_latency_s": round(min(r.created for r in pair_runs) - authors_end, 1),
        "request_tick_gaps_s": _tick_gaps(instance, since, pairs_end),
        "end_to_end_s": round(max((r.ended or r.created) for r in runs) - since, 1),
    }


def request_tick_times(instance, since: float, until: float) -> list[float]:
    """Timestamps of the ``envduels_requests`` ticks in [since, until], in order."""
    for state in instance.all_instigator_state():
        if state.instigator_name == "envduels_requests":
            ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id, limit=10_000)
            return sorted(t.timestamp for t in ticks if since <= t.timestamp <= until)
    return []


def _tick_gaps(instance, since: float, until: float) -> dict:
    """Seconds between consecutive ``envduels_requests`` ticks in [since, until]: median and max."""
    ticks = request_tick_times(instance, since, until)
    gaps = sorted(b - a for a, b in zip(ticks, ticks[1:]))
    if not gaps:
        return {}
    return {"n": len(gaps), "median": round(gaps[len(gaps) // 2], 1), "max": round(gaps[-1], 1)}


def _pairs_of(run, models: list[str]) -> int:
    """Pairs a pair run covered: 1 for a single partition, else its range (the registry's order is the dimensions')."""
    from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

    from envduels_dagster.core.requests.batching import pairs_in_range

    start, end = run.tags.get(ASSET_PARTITION_RANGE_START_TAG), run.tags.get(ASSET_PARTITION_RANGE_END_TAG)
    return len(pairs_in_range(start, end, models, models)) if start and end else 1


def figures_from_home(home: Path) -> dict:
    """The figures again, from a finished run's kept DAGSTER_HOME."""
    import dagster as dg

    from tests.helpers.daemon import runs_since

    old = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(home / "dagster")
    try:
        with dg.DagsterInstance.get() as instance:
            runs = runs_since(instance, 0)
            return _instance_figures(instance, min(r.created for r in runs) - 1, runs)
    finally:
        if old is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = old


def _wait_for_pair_stage(instance, since: float, timeout_s: float) -> bool:
    """Until the request moved past its pair stage (a downstream run exists, no pair run is active)."""
    from tests.helpers.daemon import ACTIVE, runs_since

    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        runs = runs_since(instance, since)
        if any(r.job_name == "downstream_job" for r in runs) and not any(
                r.status in ACTIVE for r in runs if r.job_name == "pair_job"):
            return True
        time.sleep(3)
    return False


def daemon_flow(models: list[str], pairs_per_run: int, rounds: int = 0, envs_per_author: int = 3,
                timeout_s: float = 3600, keep: Path | None = None, pairs_only: bool = False, seeds: int = 4,
                work_per_pair: float | None = None, extra_env: dict[str, str] | None = None,
                dagster_yaml: Path | None = None, sensor_interval: int = 5) -> dict:
    import dagster as dg

    from benchmarks.scale import write_registry
    from tests.helpers.daemon import DagsterDev, live_env, runs_since, wait_until_settled

    home = keep or Path(tempfile.mkdtemp(prefix=f"envduels-daemon-{len(models)}-{pairs_per_run}-"))
    home.mkdir(parents=True, exist_ok=True)
    registry = home / "models.yaml"
    write_registry(registry, models)
    env = live_env(home, registry, ENVDUELS_ENVS_PER_AUTHOR=str(envs_per_author), ENVDUELS_SEEDS=str(seeds),
                   ENVDUELS_SENSOR_INTERVAL_S=str(sensor_interval), ENVDUELS_TRAINING_ADMISSION="rule", ENVDUELS_PAIRS_PER_RUN=str(pairs_per_run),
                   ENVDUELS_ROUNDS=str(rounds), **(extra_env or {}))
    if pairs_per_run <= 0:  # 0: the sensor's own choice (the setting unset)
        env.pop("ENVDUELS_PAIRS_PER_RUN")
    (home / "dagster").mkdir(exist_ok=True)
    shutil.copy(dagster_yaml or REPO / "dagster.yaml", home / "dagster" / "dagster.yaml")
    load0 = os.getloadavg()
    since = time.time()
    dev = DagsterDev(env, home / "dagster-dev.log")
    sampler = TreeSampler(dev.proc.pid).start()
    old = os.environ.get("DAGSTER_HOME")
    try:
        dev.wait_ready()
        os.environ["DAGSTER_HOME"] = env["DAGSTER_HOME"]
        with dg.DagsterInstance.get() as instance:
            if pairs_only:  # the pair stage's figures only: stop once the request moved past it
                settled = _wait_for_pair_stage(instance, since, timeout_s)
            else:
                _, settled = wait_until_settled(instance, since, quiet_s=45, timeout_s=timeout_s)
            runs = runs_since(instance, since)
            out = {"models": len(models), "dagster_yaml": str(dagster_yaml or "shipped"), "pairs_per_run_max": pairs_per_run or "default", "sensor_interval_s": sensor_interval, "stage_launch": (extra_env or {}).get("ENVDUELS_STAGE_LAUNCH", "on-end"), "rounds": rounds,
                   "envs_per_author": envs_per_author, "seeds": seeds, "settled": settled, "runs": len(runs),
                   "pairs_per_pair_run": sorted(_pairs_of(r, models) for r in runs if r.job_name == "pair_job"),
                   **_instance_figures(instance, since, runs, sampler, work_per_pair)}
    finally:
        sampler.stop()
        dev.stop()
        if old is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = old
    out["loadavg_before_after"] = [round(load0[0], 2), round(os.getloadavg()[0], 2)]
    out["home"] = str(home)
    print(json.dumps(out), flush=True)
    return out
