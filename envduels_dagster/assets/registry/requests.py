"""Run requests for author and pair partitions, shared by the new-models sensor and the stale schedules.

Why one place: run keys carry the model versions (and the reason), so a repeat tick or a
daemon restart requests nothing twice, and sensor and schedules must build them alike.
Runs are limited per provider by dagster.yaml's tag_concurrency_limits (``PROVIDER_TAG``);
sensor-launched pair runs wait (retry) for their author's environments (``WAIT_TAG``).
"""

import dagster as dg

from envduels_dagster.assets.authoring.jobs import author_job
from envduels_dagster.assets.duels.jobs import pair_job
from envduels_dagster.assets.registry.partitions import pair_key

PROVIDER_TAG = "envduels/provider"
WAIT_TAG = "envduels/wait_for_author"


def author_request(name: str, version: str, provider: str, reason: str) -> dg.RunRequest:
    return dg.RunRequest(run_key=f"{reason}:author:{name}:v{version}", job_name=author_job.name, partition_key=name,
                         tags={PROVIDER_TAG: provider, "dagster/priority": "10"})


def pair_request(author: str, solver: str, versions: dict[str, str], provider: str, reason: str) -> dg.RunRequest:
    return dg.RunRequest(run_key=f"{reason}:pair:{author}|{solver}:v{versions[author]}|v{versions[solver]}",
                         job_name=pair_job.name, partition_key=pair_key(author, solver),
                         tags={PROVIDER_TAG: provider, WAIT_TAG: "true"})
