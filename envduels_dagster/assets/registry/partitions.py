"""Partitions: the registry's model names, and author x solver pairs over them.

Why dynamic: the model list lives in the registry file, not in code, so adding a
model adds partitions without a deploy.

Why two dynamic sets holding the same names ("models" for the author side,
"solvers" for the solver/learner side): Dagster 1.13's
MultiToSingleDimensionPartitionMapping ignores ``partition_dimension_name`` when it
validates the asset graph, so a pair definition whose two dimensions share one
partitions definition fails to load in the webserver. With distinct sets each
dimension matches exactly one single-dimension asset.

Roles (issue 30, ``core/requests/roster.py``): the author set holds the models with the author role (and
imports), the solver set the models with the solver role, so the pair matrix is exactly author x
solver and ``training_set``/``author_value`` exist only for learners. With every model in both roles
(the default) the two sets hold the same names, as before roles existed.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import dagster as dg

if TYPE_CHECKING:
    from envduels_dagster.core.requests.roster import Newcomers, Roster

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
    """Add registry model names as partitions of both sides (every model authors and solves); return the new."""
    from envduels_dagster.core.requests.roster import Roster

    return register_roster(instance, Roster.everyone(names))


def register_roster(instance: dg.DagsterInstance, roster: Roster) -> list[str]:
    """Add the roster's authors to the author side and its solvers to the solver side; return the models that
    got a partition they lacked (in either role)."""
    new = roster.newcomers(instance.get_dynamic_partitions(MODELS_PARTITION),
                           instance.get_dynamic_partitions(SOLVERS_PARTITION))
    if new.authors:
        instance.add_dynamic_partitions(MODELS_PARTITION, list(new.authors))
    if new.solvers:
        instance.add_dynamic_partitions(SOLVERS_PARTITION, list(new.solvers))
    return new.names


def register_import(instance: dg.DagsterInstance, partition: str) -> None:
    """Add an import's author partition (``import:<name>``, core/authoring/imports.py) to the author side only: an
    import has no model, so it is never a solver and its pairs are ``import:<name> x <model>``."""
    if not instance.has_dynamic_partition(MODELS_PARTITION, partition):
        instance.add_dynamic_partitions(MODELS_PARTITION, [partition])


def add_requests(new: Newcomers) -> list:
    """Sensor-side equivalent of ``register_roster``: each newcomer on the side(s) of its new role(s)."""
    return [*([models_partitions.build_add_request(list(new.authors))] if new.authors else []),
            *([solver_partitions.build_add_request(list(new.solvers))] if new.solvers else [])]
