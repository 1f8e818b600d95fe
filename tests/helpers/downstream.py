"""A buggy producer for the downstream example's tests: ``corrupted_training_set`` publishes a training set whose
learner's own environment slipped in, so the blocking checks fail."""

import warnings

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.registry.partitions import solver_partitions
from envduels_dagster.core.storage.warehouse import read_table, replace_rows
from envduels_dagster.core.training.publication import content_version
from envduels_dagster.resources.io_managers import PUBLISHED_IO_MANAGER_KEY


@dg.asset(name="training_set", partitions_def=solver_partitions, io_manager_key=PUBLISHED_IO_MANAGER_KEY)
def corrupted_training_set(context: dg.AssetExecutionContext, warehouse: DuckDBResource):
    """A buggy filter: the learner's own environment slips into its set (the blocking checks fail)."""
    learner = context.partition_key
    with warehouse.get_connection() as conn:
        rows = read_table(conn, "training_set", {"learner": learner})
        own = read_table(conn, "environments", {"author": learner}).iloc[0]
        bad = rows.iloc[:0].copy()
        bad.loc[0] = {**{c: None for c in rows.columns}, "learner": learner, "env_id": own["env_id"],
                      "author": learner, "domain": own["domain"], "class_name": own["class_name"],
                      "max_turns": own["max_turns"], "source_sha256": own["source_sha256"], "hint": own["hint"],
                      "benchmark_seeds": [0, 1], "n_seeds": 2, "p_cold": 0.0, "p_hint": 1.0, "lift": 1.0,
                      "lift_lower": 1.0, "lift_upper": 1.0, "rank": 1}
        replace_rows(conn, "training_set", bad, {"learner": learner})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dg.Output(bad, data_version=dg.DataVersion(content_version(bad)))
