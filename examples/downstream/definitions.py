"""A second code location, as a downstream team writes it: it consumes EnvDuels' training set.

Why this example: it is the contract test of ``envduels_dagster.consumer``. It declares the producer's
``training_set`` with one import (the external ``AssetSpec`` with the ``solvers`` partitions and the IO
manager that reads the published snapshots), and its one asset turns each learner's set into a
trainer-ready file. Declarative automation fires it once per new training set that passed its blocking
checks, never on one that failed them, never on an unchanged one (``consumer.ON_NEW_PASSING_SET``).

Run both locations on one instance: ``dagster dev -w examples/downstream/workspace.yaml``.
"""


import json
import os
from pathlib import Path

import dagster as dg

from envduels_dagster import consumer


class TrainerReadyConfig(dg.Config):
    min_lift: float = 0.5  # keep environments whose hint lifts the learner at least this much


def output_root() -> Path:
    """Where the trainer-ready files go: $DOWNSTREAM_OUT, else $ENVDUELS_HOME/downstream (read at run time)."""
    return Path(os.environ.get("DOWNSTREAM_OUT") or Path(os.environ.get("ENVDUELS_HOME") or "data") / "downstream")


@dg.asset(
    partitions_def=consumer.solver_partitions,
    ins={"training_set": dg.AssetIn(consumer.TRAINING_SET.key)},
    automation_condition=consumer.ON_NEW_PASSING_SET, code_version="1", group_name="downstream",
    kinds={"python", "jsonl"},
    description="The learner's EnvDuels training set filtered by lift, one JSON line per (environment, seed).",
)
def trainer_ready_set(context: dg.AssetExecutionContext, config: TrainerReadyConfig, training_set):
    kept = training_set[training_set["lift"] >= config.min_lift]
    path = output_root() / context.partition_key / "trainer_ready.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as fh:
        for row in kept.itertuples(index=False):
            for seed in row.benchmark_seeds:
                fh.write(json.dumps({"env_id": row.env_id, "seed": int(seed), "author": row.author,
                                     "lift": float(row.lift), "source_run_id": row.run_id,
                                     "source_data_version": row.data_version}) + "\n")
    os.replace(tmp, path)
    versions = sorted(set(training_set["data_version"]))
    return dg.MaterializeResult(metadata={
        "path": dg.MetadataValue.path(str(path)), "dagster/row_count": int(len(kept)),
        "upstream_rows": int(len(training_set)), "upstream_data_version": versions[0] if versions else "",
    })


# Declarative automation across code locations: each location's automation sensor evaluates its own assets
# (the target), and reads the other location's materializations, data versions and check results from the
# shared instance. Dagster's default automation sensor starts stopped; this one runs, every 30 s unless
# DOWNSTREAM_AUTOMATION_INTERVAL_S says otherwise (read when the location loads; the live test uses 5).
automation = dg.AutomationConditionSensorDefinition(
    "downstream_automation", target=dg.AssetSelection.assets(trainer_ready_set),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=int(os.environ.get("DOWNSTREAM_AUTOMATION_INTERVAL_S") or 30))

defs = dg.Definitions(assets=[consumer.TRAINING_SET, trainer_ready_set], sensors=[automation],
                      resources=consumer.resources())
