"""Model calls for growing the registry from N to N+1 models, against a full re-run.

Prints, for simulated models: calls for the N+1 registry from scratch, calls for
adding the (N+1)-th model when N are done (only the partitions the new-models
sensor requests), their ratio next to the expected ~(2N+1)/(N+1)^2 share of pair
work, and the calls of a full re-materialization with everything cached (0).

    .venv/bin/python benchmarks/incremental.py [--models 4] [--envs 2] [--seeds 4]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# Round 0 only: a hardening round re-reads every author's feedback, which a new solver changes by design.
os.environ.setdefault("ENVDUELS_ROUNDS", "0")

import dagster as dg  # noqa: E402

from envduels_dagster.assets.registry.partitions import pair_key, register_models  # noqa: E402
from envduels_dagster.cli.demo import materialize_all  # noqa: E402
from envduels_dagster.core.requests.staleness import new_model_plan  # noqa: E402
from envduels_dagster.sim.profiles import PROFILES  # noqa: E402
from tests.helpers.pipeline import pipeline_resources, write_registry  # noqa: E402


def calls(cache: Path) -> int:
    return sqlite3.connect(cache).execute("SELECT count(*) FROM calls").fetchone()[0] if cache.exists() else 0


def pair_calls(db: Path, involving: str | None = None) -> int:
    """Solver calls of round-0 pair play, from the episodes table (optionally only pairs with one model)."""
    import duckdb

    where = "round = 0" + (" AND (author = ? OR solver = ?)" if involving else "")
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(f"SELECT sum(model_calls) FROM episodes WHERE {where}",
                            [involving, involving] if involving else []).fetchone()[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", type=int, default=4, help="N, the models already done")
    ap.add_argument("--envs", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=4)
    args = ap.parse_args()
    names = list(PROFILES)[: args.models + 1]
    quiet = lambda _m: None  # noqa: E731
    import logging

    logging.getLogger("dagster").setLevel(logging.WARNING)
    seeds = tuple(range(args.seeds))
    with tempfile.TemporaryDirectory() as full_dir, tempfile.TemporaryDirectory() as inc_dir:
        full, inc = Path(full_dir), Path(inc_dir)
        t0 = time.perf_counter()
        res = pipeline_resources(full, write_registry(full / "models.yaml", names), args.envs, seeds)
        materialize_all(dg.DagsterInstance.ephemeral(), res, log=quiet)
        full_calls = calls(full / "cache" / "calls.sqlite")
        full_pair_calls = pair_calls(full / "warehouse.duckdb")
        full_s = time.perf_counter() - t0

        registry = write_registry(inc / "models.yaml", names[:-1])
        res = pipeline_resources(inc, registry, args.envs, seeds)
        instance = dg.DagsterInstance.ephemeral()
        materialize_all(instance, res, log=quiet)
        before = calls(inc / "cache" / "calls.sqlite")
        write_registry(registry, names)
        new, pairs = new_model_plan(names, instance.get_dynamic_partitions("models"))
        register_models(instance, names)
        from envduels_dagster.assets.authoring.assets import authored_environments
        from envduels_dagster.assets.duels.assets import duel_episodes

        t0 = time.perf_counter()
        for author in new:
            dg.materialize([authored_environments], instance=instance, resources=res, partition_key=author)
        for a, s in pairs:
            dg.materialize([duel_episodes], instance=instance, resources=res, partition_key=pair_key(a, s))
        inc_calls = calls(inc / "cache" / "calls.sqlite") - before
        inc_pair_calls = pair_calls(inc / "warehouse.duckdb", involving=names[-1])
        inc_s = time.perf_counter() - t0

        before = calls(inc / "cache" / "calls.sqlite")
        materialize_all(instance, res, log=quiet)  # marts, training sets, studies now including the new model
        study_calls = calls(inc / "cache" / "calls.sqlite") - before
        before = calls(inc / "cache" / "calls.sqlite")
        materialize_all(instance, res, log=quiet)  # everything again: all cached
        rerun_calls = calls(inc / "cache" / "calls.sqlite") - before

    n = args.models
    print(f"models: {n} -> {n + 1} (simulated), {args.envs} environments per author, {args.seeds} seeds, "
          f"rounds={os.environ['ENVDUELS_ROUNDS']}")
    print(f"full_run_calls={full_calls} ({full_s:.1f}s)")
    print(f"add_one_model_calls={inc_calls} ({inc_s:.1f}s; {len(new)} author partition, {len(pairs)} pairs)")
    print(f"pair_play_calls: full={full_pair_calls} new_pairs={inc_pair_calls} "
          f"ratio={inc_pair_calls / full_pair_calls:.3f} expected~{(2 * n + 1) / (n + 1) ** 2:.3f} "
          "(pairs differ in length: a new model's row and column are not an average slice)")
    print(f"downstream_study_calls_after_adding={study_calls} (lift_learning's baseline play of new combinations)")
    print(f"cached_full_rematerialization_calls={rerun_calls}")


if __name__ == "__main__":
    main()
