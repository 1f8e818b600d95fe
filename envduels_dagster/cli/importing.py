"""``envduels import``'s Dagster side: run ``import_job`` for an import partition on the project's instance.

Why a run and not a direct write: the environments then appear as a materialization of
``authored_environments[import:<name>]`` (with its checks) in the instance the UI shows, the write
goes through the run's warehouse resource like every other writer's, and the request sensor sees
the import land and plans its pairs. The run executes in this process (as ``envduels demo``'s do),
so an import needs no daemon; it lands in $DAGSTER_HOME (default $ENVDUELS_HOME/dagster).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

IMPORT_JOB = "import_job"


@dataclass
class ImportRun:
    run_id: str
    success: bool
    dagster_home: Path
    error: str
    num_rows: int
    valid: int
    verdicts: list[dict]  # {"env_id", "valid", "reason"} per environment, in manifest order


def run_import(partition: str, export_dir: Path) -> ImportRun:
    """Register ``partition`` (author side only) and materialize it from ``export_dir`` in one Dagster run."""
    import dagster as dg

    from envduels_dagster.assets.registry.partitions import register_import
    from envduels_dagster.cli.demo import QUIET, _interrupted
    from envduels_dagster.cli.interrupts import quiet_orphan_watchers
    from envduels_dagster.definitions import build_definitions
    from envduels_dagster.instance.home import prepare_instance_home
    from envduels_dagster.instance.run_launcher import (
        worker_tags,  # a killed import's run is then failed by run monitoring
    )

    home = prepare_instance_home()
    quiet_orphan_watchers()  # Ctrl-C: no traceback from Dagster's per-step watcher (interrupts.py)
    run_config = {**QUIET, "ops": {"authored_environments": {"config": {"export_dir": str(export_dir)}}}}
    with dg.DagsterInstance.get() as instance:
        register_import(instance, partition)
        job = build_definitions().resolve_job_def(IMPORT_JOB)
        result = job.execute_in_process(run_config=run_config, instance=instance, partition_key=partition,
                                        raise_on_error=False, tags={"envduels/import": partition, **worker_tags()})
    if not result.success and _interrupted(result):  # Ctrl-C/SIGTERM in the step: exit 130, one line (issue 44)
        raise KeyboardInterrupt
    metadata: dict = {}
    if result.success:
        (materialization,) = result.asset_materializations_for_node("authored_environments")
        metadata = {k: v.value for k, v in materialization.metadata.items()}
    error = ""
    if not result.success:
        failures = [e.step_failure_data.error for e in result.all_events if e.is_step_failure]
        error = failures[0].message.strip() if failures and failures[0] else "the run failed"
        head, _, rest = error.partition(": ")
        if failures and failures[0] and rest and " " not in head and head.endswith(failures[0].cls_name or "?"):
            error = rest  # "dagster._core.definitions.events.Failure: <what>" -> "<what>"
    return ImportRun(result.run_id, result.success, home, error.splitlines()[0] if error else "",
                     int(metadata.get("num_rows", 0)), int(metadata.get("valid", 0)), metadata.get("verdicts", []))


def cmd_import(args: argparse.Namespace) -> int:
    """Import an EnvDuels export through Dagster: checked here first (bad input: exit 2, nothing written), then
    staged under ENVDUELS_HOME and materialized by an ``import_job`` run as author partition ``import:<name>``.
    An export holding several authors' environments makes one import per author (``import:<dir>.<author>``,
    ``core/authoring/imports.import_groups``); ``--author NAME`` imports everything as one."""
    from envduels_dagster.core.authoring.imports import (
        ImportInputError,
        import_groups,
        import_partition,
        namespaced,
        stage_export,
    )
    from envduels_dagster.core.training.format import load_export
    from envduels_dagster.settings.locations import envduels_home

    specs = load_export(args.path)  # raises before anything is written (duplicate or too many seeds too)
    if not specs:  # staging nothing failed later naming an internal .tmp-... path (issue 33)
        raise ImportInputError("the export lists no environments; nothing to import")
    groups = import_groups(specs, args.path, args.author)
    for name, members in groups.items():  # ids that clash once namespaced are refused before anything is written
        namespaced(members, import_partition(name))
    for name, members in groups.items():
        partition = import_partition(name)
        staged = stage_export(members, envduels_home(), name)
        run = run_import(partition, staged)
        if not run.success:
            raise ImportRunFailed(f"run {run.run_id} of job import_job for {partition} failed: {run.error}; see the "
                                  f"run in the Dagster UI (envduels ui, DAGSTER_HOME={run.dagster_home})")
        for v in run.verdicts:
            out = {"env_id": v["env_id"], "author": partition, "valid": v["valid"], "reason": v["reason"]}
            print(json.dumps(out) if args.json else f"{v['env_id']}: "
                  + ("valid" if v["valid"] else f"REJECTED: {v['reason']}"))
        summary = (f"imported {run.num_rows} environment(s), {run.valid} valid, as author {partition} in Dagster run "
                   f"{run.run_id} (job import_job, DAGSTER_HOME={run.dagster_home})\n"
                   f"see it in the UI (envduels ui): Runs, or asset authored_environments, partition {partition}; the "
                   "envduels_requests sensor has every registry model with the solver role play it (by hand: "
                   f"materialize duel_episodes, partitions {partition}|<model>)")
        print(summary, file=sys.stderr if args.json else sys.stdout)
    return 0


class ImportRunFailed(RuntimeError):
    pass
