"""Wall time of the ``rankings`` asset at the demo scale (issue 16: the environment-level tournament intervals).

    .venv/bin/python benchmarks/rankings_time.py [--envs 10] [--n-boot 1000] [--repeat 3]

Why: every bootstrap replicate now re-decides every duel and refits Bradley-Terry; this checks that the asset
stays a few seconds. The warehouse holds the marts the asset reads (env_solver_stats, duels, pair_lift,
model_registry) for a synthetic round of ``models`` models x ``envs`` environments per author (the generator of
benchmarks/calibration_tournament.py, extended to more models by repeating its parameters); the asset is
materialized alone with Dagster, so the time includes reading and writing DuckDB.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    import calibration_tournament as ct
    import dagster as dg
    import duckdb
    import pandas as pd
    from dagster_duckdb import DuckDBResource

    from envduels_dagster.assets.marts.assets import rankings
    from envduels_dagster.core.rankings.leaderboard import RankingConfig, compute_rankings
    from envduels_dagster.core.rankings.tournament import duels_from_stats
    from envduels_dagster.resources import DuelSettings
    from envduels_dagster.resources.io_managers import PUBLISHED_IO_MANAGER_KEY, PublishedTableIOManager

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=10)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    stats = ct.draw_stats(np.random.default_rng(0), args.envs, 4).assign(round=0)
    duels = duels_from_stats(stats).assign(round=0)
    pair = stats[~stats.is_self_pair].groupby(["author", "solver"], as_index=False)["lift"].mean()
    pair = pair.assign(lift_ci_lower=pair["lift"] - 0.1, lift_ci_upper=pair["lift"] + 0.1, lift_ci_reason=None,
                       round=0)
    registry = pd.DataFrame({"name": ct.NAMES, "model": [f"openai/{n}" for n in ct.NAMES]})
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "warehouse.duckdb")
        with duckdb.connect(db) as conn:
            for name, df in (("env_solver_stats", stats), ("duels", duels), ("pair_lift", pair),
                             ("model_registry", registry)):
                conn.register("df", df)
                conn.execute(f"CREATE TABLE {name} AS SELECT * FROM df")
                conn.unregister("df")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            compute_rankings(stats, duels, RankingConfig(n_boot=args.n_boot))
            t1 = time.perf_counter()
            result = dg.materialize([rankings], instance=dg.DagsterInstance.ephemeral(),
                                    resources={"warehouse": DuckDBResource(database=db), "settings": DuelSettings(),
                                               PUBLISHED_IO_MANAGER_KEY: PublishedTableIOManager(
                                                   root=str(Path(tmp) / "published"))},
                                    run_config={"ops": {"rankings": {"config": {"n_boot": args.n_boot}}},
                                                "loggers": {"console": {"config": {"log_level": "ERROR"}}}})
            t2 = time.perf_counter()
            assert result.success
            print(f"5 models x {args.envs} envs/author, n_boot {args.n_boot}: compute_rankings {t1 - t0:.2f}s, "
                  f"rankings asset (materialize, incl. DuckDB and run start) {t2 - t1:.2f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
