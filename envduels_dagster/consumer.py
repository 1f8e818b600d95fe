"""The one import a downstream team needs to consume EnvDuels' published tables from Dagster.

Why a module of its own: a consumer in another code location must not restate our internals (table
layout, partition expression, schema, where the files live). It declares our assets as external
``AssetSpec`` s and reads them with our IO manager::

    import dagster as dg
    from envduels_dagster import consumer

    @dg.asset(partitions_def=consumer.solver_partitions, automation_condition=consumer.ON_NEW_PASSING_SET,
              ins={"training_set": dg.AssetIn(consumer.TRAINING_SET.key)})
    def my_filtered_set(training_set):          # a pandas DataFrame: the learner's published rows
        ...

    defs = dg.Definitions(assets=[consumer.TRAINING_SET, my_filtered_set], resources=consumer.resources())

Same instance, same ENVDUELS_HOME (or ``resources(root=...)``): the rows are the read-only snapshots the
producer published (``core/training/publication.py``), so reading never waits for, or blocks, a running pipeline.
A snapshot is published only once the materialization's checks passed (write-audit-publish): a set that
fails them never replaces the last passing one, so readers see only sets that passed.
Each row carries ``run_id`` and ``data_version``; ``published_row_schema()`` is their JSON Schema.
"""

from __future__ import annotations

import dagster as dg

from envduels_dagster.assets.registry.partitions import solver_partitions
from envduels_dagster.assets.shared import AFTER_CHECKED_TRAINING_SET
from envduels_dagster.resources.io_managers import PUBLISHED_IO_MANAGER_KEY, PublishedTableIOManager

__all__ = ["ON_NEW_PASSING_SET", "PUBLISHED_IO_MANAGER_KEY", "RANKINGS", "TRAINING_SET", "PublishedTableIOManager",
           "published_row_schema", "resources", "solver_partitions"]

# The learner's training set: partitioned by the `solvers` dynamic partitions (one per learner).
TRAINING_SET = dg.AssetSpec("training_set", partitions_def=solver_partitions, group_name="envduels",
                            description="EnvDuels training set of one learner (published snapshot).",
                            ).with_io_manager_key(PUBLISHED_IO_MANAGER_KEY)
# One row per model: solver and author ranks with intervals (unpartitioned; published once its checks pass).
RANKINGS = dg.AssetSpec("rankings", group_name="envduels",
                        description="EnvDuels rankings (published snapshot).").with_io_manager_key(PUBLISHED_IO_MANAGER_KEY)

# Fire once per new training set that passed its blocking checks: the set's data version must have
# changed (an unchanged re-materialization keeps its version, so it triggers nothing), and its
# blocking checks must have passed (plain eager() waits for materializations, not checks). The
# producer's own export follows its training sets by the same condition.
ON_NEW_PASSING_SET = AFTER_CHECKED_TRAINING_SET


def resources(root: str = "") -> dict[str, object]:
    """The IO manager that reads the snapshots (``root`` empty: $ENVDUELS_HOME/published at run time)."""
    return {PUBLISHED_IO_MANAGER_KEY: PublishedTableIOManager(root=root)}


def published_row_schema() -> dict:
    """JSON Schema of a published ``training_set`` row (``core/training/contract.py``)."""
    from envduels_dagster.core.training.contract import TrainingSetRow

    return TrainingSetRow.model_json_schema()
