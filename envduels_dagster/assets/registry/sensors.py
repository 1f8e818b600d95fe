"""``new_models_sensor``: adding a model to the registry runs exactly its new partitions.

It registers new names as dynamic partitions and, in the same tick, requests the
new author partition and the 2N+1 new pairs. Run keys include the model versions,
and the cursor remembers what was requested, so a repeat tick or a daemon restart
requests nothing twice. Removing a model from the registry deletes nothing: its
partitions and warehouse rows stay (see README).
"""

import json

import dagster as dg

from envduels_dagster.assets.authoring.jobs import author_job
from envduels_dagster.assets.duels.jobs import pair_job
from envduels_dagster.assets.registry.partitions import MODELS_PARTITION, add_requests
from envduels_dagster.assets.registry.requests import author_request, pair_request
from envduels_dagster.core.registry import RegistryError, load_registry
from envduels_dagster.core.staleness import new_model_plan


@dg.sensor(name="new_models_sensor", jobs=[author_job, pair_job], minimum_interval_seconds=30,
           default_status=dg.DefaultSensorStatus.RUNNING,
           description="Registers models added to the registry (ENVDUELS_REGISTRY) and runs only their partitions.")
def new_models_sensor(context: dg.SensorEvaluationContext):
    try:
        registry = load_registry()
    except RegistryError as exc:
        return dg.SkipReason(f"registry is invalid, nothing requested: {exc}")
    registered = context.instance.get_dynamic_partitions(MODELS_PARTITION)
    requested = set(json.loads(context.cursor)) if context.cursor else set()
    new, pairs = new_model_plan(registry.names, registered)
    if not new:
        return dg.SkipReason(f"no new models ({len(registry.names)} in the registry)")
    versions = {m.name: m.version for m in registry.models}
    providers = {m.name: m.provider for m in registry.models}
    runs = [author_request(n, versions[n], providers[n], "new") for n in new]
    runs += [pair_request(a, s, versions, providers[s], "new") for a, s in pairs]
    runs = [r for r in runs if r.run_key not in requested]
    context.log.info(f"new models {new}: {len(runs)} runs ({len(pairs)} pairs)")
    return dg.SensorResult(
        run_requests=runs,
        dynamic_partitions_requests=add_requests(new),
        cursor=json.dumps(sorted(requested | {r.run_key for r in runs})),
    )

