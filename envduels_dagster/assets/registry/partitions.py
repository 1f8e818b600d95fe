"""Partitions: the registry's model names, and author x solver pairs over them.

Why dynamic: the model list lives in the registry file, not in code, so adding a
model adds partitions without a deploy.

Why two dynamic sets holding the same names ("models" for the author side,
"solvers" for the solver/learner side): Dagster 1.13's
MultiToSingleDimensionPartitionMapping ignores ``partition_dimension_name`` when it
validates the asset graph, so a pair definition whose two dimensions share one
partitions definition fails to load in the webserver. With distinct sets each
dimension matches exactly one single-dimension asset. ``register_models`` keeps
both sets equal.
"""

from __future__ import annotations

import warnings

import dagster as dg

MODELS_PARTITION = "models"
SOLVERS_PARTITION = "solvers"

models_partitions = dg.DynamicPartitionsDefinition(name=MODELS_PARTITION)
solver_partitions = dg.DynamicPartitionsDefinition(name=SOLVERS_PARTITION)
pair_partitions = dg.MultiPartitionsDefinition({"author": models_partitions, "solver": solver_partitions})

with warnings.catch_warnings():  # the mapping is marked beta; it is the documented way to map pair -> model
    warnings.simplefilter("ignore")
    by_author = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="author")
    by_solver = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="solver")


def pair_key(author: str, solver: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"author": author, "solver": solver})


def register_models(instance: dg.DagsterInstance, names: list[str]) -> list[str]:
    """Add registry model names as partitions; return the ones that were new."""
    existing = set(instance.get_dynamic_partitions(MODELS_PARTITION))
    new = [n for n in names if n not in existing]
    if new:
        instance.add_dynamic_partitions(MODELS_PARTITION, new)
    solvers = set(instance.get_dynamic_partitions(SOLVERS_PARTITION))
    if missing := [n for n in names if n not in solvers]:
        instance.add_dynamic_partitions(SOLVERS_PARTITION, missing)
    return new


def register_import(instance: dg.DagsterInstance, partition: str) -> None:
    """Add an import's author partition (``import:<name>``, core/imports.py) to the author side only: an
    import has no model, so it is never a solver and its pairs are ``import:<name> x <model>``."""
    if not instance.has_dynamic_partition(MODELS_PARTITION, partition):
        instance.add_dynamic_partitions(MODELS_PARTITION, [partition])


def add_requests(names: list[str]) -> list:
    """Sensor-side equivalent of ``register_models``."""
    return [models_partitions.build_add_request(names), solver_partitions.build_add_request(names)]
