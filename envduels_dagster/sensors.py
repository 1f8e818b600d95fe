"""``new_models_sensor``: adding a model to the registry runs exactly its new partitions.

It registers new names as dynamic partitions and, in the same tick, requests the
new author partition and the 2N+1 new pairs. Run keys include the model versions,
and the cursor remembers what was requested, so a repeat tick or a daemon restart
requests nothing twice. Removing a model from the registry deletes nothing: its
partitions and warehouse rows stay (see README).
"""

import json

import dagster as dg

from envduels_dagster.core.registry import RegistryError, load_registry
from envduels_dagster.core.staleness import new_model_plan
from envduels_dagster.jobs import PROVIDER_TAG, WAIT_TAG, author_job, pair_job
from envduels_dagster.partitions import MODELS_PARTITION, add_requests, pair_key


def author_request(name: str, version: str, provider: str, reason: str) -> dg.RunRequest:
    return dg.RunRequest(run_key=f"{reason}:author:{name}:v{version}", job_name=author_job.name, partition_key=name,
                         tags={PROVIDER_TAG: provider, "dagster/priority": "10"})


def pair_request(author: str, solver: str, versions: dict[str, str], provider: str, reason: str) -> dg.RunRequest:
    return dg.RunRequest(run_key=f"{reason}:pair:{author}|{solver}:v{versions[author]}|v{versions[solver]}",
                         job_name=pair_job.name, partition_key=pair_key(author, solver),
                         tags={PROVIDER_TAG: provider, WAIT_TAG: "true"})


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


# Dagster's default automation sensor starts stopped; this one runs, so marts, rankings and
# training sets follow finished pair runs (assets opt in with AFTER_PAIRS).
automation_sensor = dg.AutomationConditionSensorDefinition(
    "envduels_automation", target=dg.AssetSelection.all(), default_status=dg.DefaultSensorStatus.RUNNING)
