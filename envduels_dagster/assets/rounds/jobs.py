"""Per-round jobs: ``hardened_r{r}_job`` [author] and ``pairs_r{r}_job`` [pair], the stages of round r in a request.

One job per round and partitions definition: a job may not mix partitions definitions, and a request
launches round r's hardening only after round r-1's pairs, and round r's pairs only after its hardening.
"""

import dagster as dg

from envduels_dagster.assets.registry.stage_end import STAGE_HOOKS


def round_jobs(rounds: int) -> list:
    jobs = []
    for r in range(1, rounds + 1):
        jobs.append(dg.define_asset_job(
            f"hardened_r{r}_job", hooks=STAGE_HOOKS, selection=dg.AssetSelection.assets(f"hardened_environments_r{r}"),
            executor_def=dg.in_process_executor, description=f"Round {r}: harden one author's environments."))
        jobs.append(dg.define_asset_job(
            f"pairs_r{r}_job", hooks=STAGE_HOOKS, selection=dg.AssetSelection.assets(f"duel_episodes_r{r}"),
            executor_def=dg.in_process_executor, description=f"Round {r}: play one (author, solver) pair."))
    return jobs
