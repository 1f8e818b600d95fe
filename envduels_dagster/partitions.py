"""Partitions: one dynamic set of model names, and author x solver pairs over it.

Why dynamic: the model list lives in the registry file, not in code, so adding a
model adds partitions without a deploy.
"""

from __future__ import annotations

import warnings

import dagster as dg

MODELS_PARTITION = "models"

models_partitions = dg.DynamicPartitionsDefinition(name=MODELS_PARTITION)
pair_partitions = dg.MultiPartitionsDefinition({"author": models_partitions, "solver": models_partitions})

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
    return new
