"""The requests sensor evaluated as the daemon would, without a daemon: ``tick`` evaluates it and applies its partition
requests, ``keys_of`` lists the partitions a job's run requests cover, ``finish`` records runs as the run workers
would; ``quiet_resources`` is a fixture of the two resources the sensor reads."""

from __future__ import annotations

import dagster as dg
import pytest

from envduels_dagster.assets.registry.sensors import build_requests_sensor


def requests_sensor(rounds: int = 1):
    from envduels_dagster.assets.authoring.jobs import author_job
    from envduels_dagster.assets.duels.jobs import pair_job
    from envduels_dagster.assets.marts.jobs import downstream_job
    from envduels_dagster.assets.rounds.jobs import round_jobs
    from envduels_dagster.assets.studies.jobs import studies_job
    from envduels_dagster.assets.training.jobs import learner_job

    return build_requests_sensor(rounds, [author_job, pair_job, *round_jobs(rounds), downstream_job, learner_job,
                                          studies_job])


def tick(instance, cursor=None, resources=None, sensor=None):
    """Evaluate the sensor as the daemon would, then apply its partition requests to the instance."""
    ctx = dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources)
    with dg.partition_loading_context(dynamic_partitions_store=instance):
        result = (sensor or requests_sensor())(ctx)
    if isinstance(result, dg.SkipReason):
        return [], cursor, result
    for req in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
    return result.run_requests or [], result.cursor, result.skip_reason


def keys_of(runs, job, instance=None):
    """The partitions ``runs`` of ``job`` cover: a run's partition, or every pair of a batch's range."""
    from envduels_dagster.assets.registry.requests import dimension_orders
    from envduels_dagster.core.requests.batching import pairs_in_range

    out = []
    for r in runs:
        if r.job_name != job:
            continue
        if r.partition_key is None and "dagster/asset_partition_range_start" in r.tags:
            out += pairs_in_range(r.tags["dagster/asset_partition_range_start"],
                                  r.tags["dagster/asset_partition_range_end"], *dimension_orders(instance))
        else:
            out.append(str(r.partition_key))
    return sorted(out)


def finish(instance, runs, status=dg.DagsterRunStatus.SUCCESS):
    """Record ``runs`` in the instance as finished with ``status`` (what the daemon's run workers would do)."""
    for r in runs:
        tags = {**r.tags}
        if r.partition_key is not None:
            tags["dagster/partition"] = str(r.partition_key)
        from dagster._core.storage.dagster_run import DagsterRun
        from dagster._core.utils import make_new_run_id

        instance.add_run(DagsterRun(job_name=r.job_name, run_id=make_new_run_id(), tags=tags, status=status))


@pytest.fixture
def quiet_resources(tmp_path):
    from dagster_duckdb import DuckDBResource

    from envduels_dagster.resources import DuelSettings

    return {"warehouse": DuckDBResource(database=str(tmp_path / "w.duckdb")), "settings": DuelSettings()}
