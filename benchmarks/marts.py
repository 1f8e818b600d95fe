"""Benchmark: the dbt marts (``dbt build`` through Dagster) plus ``rankings`` over 1,000,000 episode rows.

    .venv/bin/python benchmarks/marts.py [--models 25] [--envs-per-author 200] [--seeds 4] [--keep DIR]

Synthetic warehouse: every model authors ``envs-per-author`` environments and solves every model's
environments (self pairs included, as the pipeline does) on ``seeds`` paired seeds, cold and hinted, so
rows = models^2 x envs x seeds x 2 (25^2 x 200 x 4 x 2 = 1,000,000). Solvers have graded skill and
environments graded difficulty and hint quality; 1% of episodes are incomplete. Goal: under 60 s.
Times: generation, dbt build with its 50+ tests (as run by the Dagster asset), rankings (1000-replicate
cluster bootstrap), total of the last two.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def synthetic(models: int, envs_per_author: int, seeds: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    names = [f"m{i:02d}" for i in range(models)]
    skill = np.linspace(2.0, -2.0, models)  # m00 strongest solver
    n_env = models * envs_per_author
    env_author = np.repeat(np.arange(models), envs_per_author)
    difficulty = rng.normal(0.0, 1.0, n_env) + np.linspace(-0.5, 1.0, models)[env_author]
    hint_gain = rng.uniform(0.0, 2.0, n_env)
    domains = np.array(["navigation", "deduction", "induction", "search"])
    env_ids = np.array([f"{names[a]}.r0.{k:03d}" for a in range(models) for k in range(envs_per_author)])

    # episodes: env x solver x seed x condition
    e, s, k, c = np.meshgrid(np.arange(n_env), np.arange(models), np.arange(seeds), np.arange(2), indexing="ij")
    e, s, k, c = e.ravel(), s.ravel(), k.ravel(), c.ravel()
    logit = skill[s] - difficulty[e] + c * hint_gain[e]
    success = rng.random(e.size) < 1.0 / (1.0 + np.exp(-logit))
    incomplete = rng.random(e.size) < 0.01
    status = np.where(incomplete, "incomplete", np.where(success, "success", "failure"))
    name_arr = np.array(names)
    episodes = pd.DataFrame({
        "env_id": env_ids[e], "author": name_arr[env_author[e]], "solver": name_arr[s],
        "condition": np.where(c == 1, "hinted", "cold"), "seed": k.astype(np.int32), "status": status,
        "is_self_pair": env_author[e] == s,
    })
    environments = pd.DataFrame({
        "env_id": env_ids, "author": name_arr[env_author], "round": 0,
        "domain": domains[np.arange(n_env) % len(domains)], "family": "synthetic", "valid": True,
        "source": "class Env:\n    pass\n",
    })
    registry = pd.DataFrame({"name": names, "model": [f"openai/{n}" for n in names]})
    return episodes, environments, registry


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=25)
    parser.add_argument("--envs-per-author", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--keep", help="write the warehouse into this directory and keep it")
    args = parser.parse_args()

    import dagster as dg
    import duckdb
    from dagster_duckdb import DuckDBResource

    from envduels_dagster.assets.marts.assets import rankings
    from envduels_dagster.assets.marts.dbt import build_dbt_marts, dbt_resource
    from envduels_dagster.assets.marts.project import prepare_manifest

    prepare_manifest()
    dbt_marts = build_dbt_marts()
    from envduels_dagster.core.storage.warehouse import ensure_schema

    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="envduels-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / "warehouse.duckdb"
    db.unlink(missing_ok=True)

    t0 = time.perf_counter()
    episodes, environments, registry = synthetic(args.models, args.envs_per_author, args.seeds)
    with duckdb.connect(str(db)) as conn:
        ensure_schema(conn)
        for table, df in (("episodes", episodes), ("environments", environments), ("model_registry", registry)):
            conn.register("df", df)
            conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM df")
            conn.unregister("df")
    t_gen = time.perf_counter() - t0
    print(f"generated {len(episodes):,} episode rows ({args.models} models, {len(environments):,} environments, "
          f"{args.seeds} seeds) in {t_gen:.1f}s -> {db}", flush=True)

    resources = {"dbt": dbt_resource(), "warehouse": DuckDBResource(database=str(db))}
    quiet = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
    instance = dg.DagsterInstance.ephemeral()

    t1 = time.perf_counter()
    result = dg.materialize([dbt_marts], instance=instance, resources=resources, run_config=quiet,
                            raise_on_error=False)
    t_dbt = time.perf_counter() - t1
    checks = result.get_asset_check_evaluations()
    print(f"dbt build (6 models, {len(checks)} tests as asset checks, "
          f"{sum(not c.passed for c in checks)} failed): {t_dbt:.1f}s  success={result.success}", flush=True)

    t2 = time.perf_counter()
    result2 = dg.materialize([rankings], instance=instance, resources=resources, run_config=quiet,
                             raise_on_error=False)
    t_rank = time.perf_counter() - t2
    print(f"rankings (1000 bootstrap replicates): {t_rank:.1f}s  success={result2.success}", flush=True)

    with duckdb.connect(str(db), read_only=True) as conn:
        sizes = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                 for t in ("env_solver_stats", "pair_lift_bootstrap", "pair_lift", "duels", "rankings")}
        top = conn.execute("SELECT model, round(solver_score, 3), solver_rank FROM rankings "
                           "ORDER BY solver_rank LIMIT 3").fetchall()
    print("rows:", ", ".join(f"{k}={v:,}" for k, v in sizes.items()))
    print("top solvers:", top)
    print(f"TOTAL dbt build + rankings over {len(episodes):,} episode rows: {t_dbt + t_rank:.1f}s (goal < 60 s)")
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if result.success and result2.success else 1


if __name__ == "__main__":
    sys.exit(main())
