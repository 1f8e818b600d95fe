"""Benchmark (issue 34): the data checks' cost against the play's, great-expectations only vs. pandas first.

    .venv/bin/python benchmarks/checks_cost.py --models 4 --envs-per-author 10 --seeds 8 --repeats 3

Plays a small tournament of simulated models in-process through Dagster (the ``duel_episodes`` asset
without its checks, one run per pair; each pair's play time from its ``seconds`` metadata), then
evaluates the episodes suite of every pair (``evaluate_episodes``: read the pair's rows, validate,
build the check results) and the other suites once, in one process, side by side:

* ``pandas-first`` (now): each rule answered in pandas, GX only for rules pandas cannot pass;
* ``gx-only`` (before issue 34): every rule through great-expectations (``gx_runner.PANDAS_FIRST = False``).

The pandas-first pass goes first, in a process that has not imported great-expectations (it must not
import it on clean data; checked), then the GX import is timed on its own, then the two modes alternate
``--repeats`` times. Both give the same verdicts (checked here on every pair; tests/assets/training/test_checks.py
checks messages and metadata too). Prints seconds per pair for each mode, the GX import, and the checks'
share of (play + checks) per pair.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROFILES = ["oracle", "expert", "journeyman", "novice", "apprentice"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=4)
    parser.add_argument("--envs-per-author", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import dagster as dg
    import duckdb
    from dagster_duckdb import DuckDBResource

    from envduels_dagster.assets.authoring.assets import authored_environments
    from envduels_dagster.assets.authoring.checks import evaluate_environments
    from envduels_dagster.assets.checking import gx_runner
    from envduels_dagster.assets.duels.assets import duel_episodes
    from envduels_dagster.assets.duels.checks import evaluate_episodes
    from envduels_dagster.assets.registry.partitions import pair_key, register_models
    from envduels_dagster.definitions import build_resources
    from envduels_dagster.resources import DuelSettings, GatewayResource

    work = Path(tempfile.mkdtemp(prefix="envduels-checks-cost-"))
    names = PROFILES[: args.models]
    registry = work / "models.yaml"
    registry.write_text("models:\n" + "".join(f"  - name: {n}\n    model: envduels-sim/{n}\n" for n in names))
    resources = build_resources(
        gateway=GatewayResource(registry_path=str(registry), cache_path=str(work / "calls.sqlite")),
        settings=DuelSettings(envs_per_author=args.envs_per_author, benchmark_seeds=list(range(args.seeds))),
        warehouse=DuckDBResource(database=str(work / "warehouse.duckdb")))
    quiet = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
    instance = dg.DagsterInstance.ephemeral()
    register_models(instance, names)
    load0 = os.getloadavg()[0]
    for n in names:
        assert dg.materialize([authored_environments], instance=instance, resources=resources, partition_key=n,
                              run_config=quiet).success
    play: dict[tuple[str, str], float] = {}
    for a in names:
        for s in names:
            result = dg.materialize([duel_episodes], instance=instance, resources=resources,
                                    partition_key=pair_key(a, s), run_config=quiet)
            play[(a, s)] = result.asset_materializations_for_node("duel_episodes")[0].metadata["seconds"].value
    db = str(work / "warehouse.duckdb")
    with duckdb.connect(db, read_only=True) as conn:
        episodes = conn.execute("SELECT count(*) FROM episodes").fetchone()[0]
    print(f"setup: {len(names)} models, {len(play)} pairs, {episodes} episodes "
          f"({episodes / len(play):.0f} a pair), play median {statistics.median(play.values()):.2f}s a pair; "
          f"load1 at start {load0:.1f}", flush=True)

    def evaluate(pandas_first: bool) -> tuple[float, dict]:
        gx_runner.PANDAS_FIRST = pandas_first
        verdicts = {}
        t = time.perf_counter()
        with duckdb.connect(db, read_only=True) as conn:
            for a, s in play:
                verdicts[(a, s)] = {r.check_name: r.passed for r in evaluate_episodes(conn, a, s)}
            for a in names:
                verdicts[("environments", a)] = {r.check_name: r.passed for r in evaluate_environments(conn, a)}
        return (time.perf_counter() - t) / len(play), verdicts

    fast, fast_verdicts = evaluate(True)
    assert "great_expectations" not in sys.modules, "the pandas-first pass imported great-expectations"
    t = time.perf_counter()
    gx_runner.gx()
    gx_import = time.perf_counter() - t
    print(f"great_expectations import (before: once per process, i.e. per run under the daemon): {gx_import:.2f}s",
          flush=True)
    times: dict[str, list[float]] = {"pandas-first": [fast], "gx-only": []}
    for i in range(args.repeats):
        slow, slow_verdicts = evaluate(False)
        assert slow_verdicts == fast_verdicts, "the two modes disagree"
        times["gx-only"].append(slow)
        if i < args.repeats - 1:
            times["pandas-first"].append(evaluate(True)[0])
    play_median = statistics.median(play.values())
    for mode, values in times.items():
        per_pair = statistics.median(values)
        print(f"{mode:13s} checks per pair: median {per_pair:.3f}s (runs: {', '.join(f'{v:.3f}' for v in values)}); "
              f"share of play + checks per pair {100 * per_pair / (per_pair + play_median):.0f}%", flush=True)
    ratio = statistics.median(times["gx-only"]) / statistics.median(times["pandas-first"])
    print(f"gx-only / pandas-first = {ratio:.1f}x; verdicts identical on {len(fast_verdicts)} suites; "
          f"load1 at end {os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
