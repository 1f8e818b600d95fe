"""Live flow figures: a model appended to the registry while ``dagster dev`` runs (issue: live flows).

Prints the runs the daemon launched, how many refreshed the marts, their outcomes and the wall time
from the registry edit to the last run's end. Usage:

    .venv/bin/python benchmarks/live_add_model.py [--home DIR]
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.daemon import add_model_live  # noqa: E402

MART_KEYS = {"pair_lift", "env_solver_stats", "author_scores", "solver_scores", "duels"}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--home", type=Path, default=None)
    args = parser.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="envduels-live-"))
    result = add_model_live(home, ["oracle", "journeyman", "novice"], "expert")
    kinds = collections.Counter()
    for r in result.runs:
        kind = r.job_name if r.job_name != "__ASSET_JOB" else ("marts" if MART_KEYS & set(r.assets) else
                                                               ",".join(r.assets)[:60])
        kinds[(kind, r.status)] += 1
    print(f"home: {home}")
    print(f"settled: {result.settled}; runs: {len(result.runs)}; by status: {result.by_status()}")
    print(f"mart refresh runs: {sum(1 for r in result.runs if MART_KEYS & set(r.assets) or r.job_name == 'downstream_job')}; requests: {len({r.tags.get('envduels/request') for r in result.runs} - {None})}")
    print(f"wall time from registry edit to last run end: {result.wall_s:.0f} s")
    for (kind, status), n in sorted(kinds.items()):
        print(f"  {n:3d} x {kind} [{status}]")
    for r in result.runs:
        print(f"  {r.status:8s} {r.job_name:28s} part={r.partition} assets={','.join(r.assets)[:90]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
