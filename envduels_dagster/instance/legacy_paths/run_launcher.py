"""``envduels_dagster.run_launcher``: the path an existing dagster.yaml names (now ``envduels_dagster.instance.run_launcher``)."""

from envduels_dagster.instance.run_launcher import WorkerCheckingRunLauncher

__all__ = ["WorkerCheckingRunLauncher"]
