"""The run queue's coordinator: Dagster's queued coordinator that tags every run with its model provider.

Why: per-provider limits (``concurrency > runs > tag_concurrency_limits`` on ``envduels/provider`` in
dagster.yaml) only act on runs that carry the tag. Sensors can set it, but runs launched from the UI's
"Materialize" button or by a backfill cannot: their tags come from Dagster, not from us. The
coordinator sees every run before the queue does, however it was launched, so the tag is set here once:
the provider (registry ``pool``) of the model the run calls — the solver of a pair, the author of an
authoring or hardening partition. Runs that call no model (marts, training sets) get no tag and only
count against the global run limit.

Configure it in dagster.yaml (``run_coordinator: module: envduels_dagster.instance.run_coordinator, class:
ProviderTaggedRunCoordinator``); limits stay in the ``concurrency:`` block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dagster._core.run_coordinator import SubmitRunContext
from dagster._core.run_coordinator.queued_run_coordinator import QueuedRunCoordinator
from dagster._core.storage.dagster_run import DagsterRun

PROVIDER_TAG = "envduels/provider"
# Single-dimension partitions that call their model: authoring and hardening (learners call none).
# Asset jobs launched by name carry no asset selection on the run, so their job names count too.
CALLING_MODEL_ASSETS = ("authored_environments", "hardened_environments_r")
CALLING_MODEL_JOBS = ("author_job", "hardened_r")


RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"


def provider_for(tags: Mapping[str, str], job_name: str, asset_names: list[str],
                 providers: Mapping[str, str], solvers_order: Sequence[str] | None = None) -> str | None:
    """The provider a run's model calls go to, from its partition tags; None when it calls no model.

    A batch of pairs (a ranged run, ``core/requests/batching.py``) has one when all solvers of its range
    (``solvers_order``: the solver dimension's partitions in order) share a provider.
    """
    solver = tags.get("dagster/partition/solver")
    if solver:
        return providers.get(solver)
    start, end = tags.get(RANGE_START, ""), tags.get(RANGE_END, "")
    if "|" in start and "|" in end:
        from envduels_dagster.core.requests.batching import range_members

        s0, s1 = start.split("|", 1)[1], end.split("|", 1)[1]
        solvers = range_members(s0, s1, solvers_order) if solvers_order else sorted({s0, s1})
        found = {providers.get(s) for s in solvers}
        return found.pop() if len(found) == 1 else None
    model = tags.get("dagster/partition")
    calls_author = job_name.startswith(CALLING_MODEL_JOBS) or any(n.startswith(CALLING_MODEL_ASSETS)
                                                                   for n in asset_names)
    if model and "|" not in model and calls_author:
        return providers.get(model)
    return None


class ProviderTaggedRunCoordinator(QueuedRunCoordinator):
    def submit_run(self, context: SubmitRunContext) -> DagsterRun:
        run = context.dagster_run
        if PROVIDER_TAG not in run.tags:
            provider = self._provider(run)
            if provider:
                self._instance.add_run_tags(run.run_id, {PROVIDER_TAG: provider})
        return super().submit_run(context)

    def _provider(self, run: DagsterRun) -> str | None:
        from envduels_dagster.core.models.registry import RegistryError, load_registry
        from envduels_dagster.settings.locations import registry_file

        try:
            registry = load_registry(registry_file())
        except RegistryError as exc:  # an invalid registry must not block the queue: the run fails itself
            self._logger.warning(f"run {run.run_id}: no provider tag, the registry is invalid: {exc}")
            return None
        names = [k.to_user_string() for k in (run.asset_selection or [])]
        order = self._instance.get_dynamic_partitions("solvers") if RANGE_START in run.tags else None
        return provider_for(run.tags, run.job_name, names, {m.name: m.provider for m in registry.models}, order)
