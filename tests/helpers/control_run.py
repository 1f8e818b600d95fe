"""One end-to-end control run (tests/core/rankings/test_controls.py): ``materialize_all`` on a registry of
tests/registries with one hardening round, in this process or in a child process.

Why a child process: the negative and the planted control run side by side to save suite time, and a pipeline
in this process shares process-wide state with any other (ENVDUELS_HOME's published snapshots, the dbt step's
environment variables, sys.stdout while a run is captured). A child with its own ENVDUELS_HOME shares none of
it, and its sandboxes run on the other core. ``python -m tests.helpers.control_run TMP REGISTRY ENVS SEEDS [no-learners]``
(SEEDS comma-separated) writes TMP/warehouse.duckdb, TMP/models.yaml and TMP/progress_metadata.json.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import REGISTRIES, REPO

METADATA = "progress_metadata.json"


def run_control(tmp: Path, registry_name: str, envs_per_author: int, seeds: tuple[int, ...],
                learners: bool = True) -> tuple[Path, Path, dict]:
    """Run the pipeline in this process (ENVDUELS_ROUNDS as the caller set it); (warehouse, registry, metadata of
    ``authoring_progress``: its plain values). ``learners=False``: without the per-learner assets and studies."""
    import dagster as dg

    from envduels_dagster.cli.demo import materialize_all
    from tests.helpers.pipeline import pipeline_resources

    registry = tmp / "models.yaml"
    shutil.copy(REGISTRIES / registry_name, registry)
    resources = pipeline_resources(tmp, registry, envs_per_author=envs_per_author, seeds=seeds)
    instance = dg.DagsterInstance.ephemeral()
    materialize_all(instance, resources, log=lambda _m: None, learners=learners)
    event = instance.get_latest_materialization_event(dg.AssetKey("authoring_progress"))
    assert event is not None and event.asset_materialization is not None
    metadata = {k: v.value for k, v in event.asset_materialization.metadata.items()
                if isinstance(v.value, (int, float, str, bool)) or v.value is None}
    (tmp / METADATA).write_text(json.dumps(metadata))
    return tmp / "warehouse.duckdb", registry, metadata


def start_control(tmp: Path, registry_name: str, envs_per_author: int, seeds: tuple[int, ...],
                  rounds: int = 1, learners: bool = True) -> subprocess.Popen:
    """The same run in a child process with its own ENVDUELS_HOME (tmp/home); its output goes to tmp/run.log."""
    env = {**os.environ, "ENVDUELS_HOME": str(tmp / "home"), "ENVDUELS_ROUNDS": str(rounds)}
    with (tmp / "run.log").open("w") as log:  # the child keeps its own handle
        return subprocess.Popen([sys.executable, "-m", "tests.helpers.control_run", str(tmp), registry_name,
                                 str(envs_per_author), ",".join(map(str, seeds)),
                                 "learners" if learners else "no-learners"],
                                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)


def finish_control(proc: subprocess.Popen, tmp: Path, timeout_s: float = 900) -> tuple[Path, Path, dict]:
    """Wait for a ``start_control`` child; what ``run_control`` returns."""
    rc = proc.wait(timeout=timeout_s)
    assert rc == 0, f"control run failed (exit {rc}): {(tmp / 'run.log').read_text()[-5000:]}"
    return tmp / "warehouse.duckdb", tmp / "models.yaml", json.loads((tmp / METADATA).read_text())


if __name__ == "__main__":
    tmp_dir, name, envs, seed_list = sys.argv[1:5]
    run_control(Path(tmp_dir), name, int(envs), tuple(int(s) for s in seed_list.split(",")),
                learners=sys.argv[5:6] != ["no-learners"])
