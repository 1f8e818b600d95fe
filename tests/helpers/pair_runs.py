"""One process's share of a pipeline, as a Dagster run worker would do it: ``python -m tests.helpers.pair_runs``.

Why a script: the shared-profile tests need *separate processes* running real Dagster
materializations at once, each finding the warehouse, the cache and the instance through the
storage profile in its environment (ENVDUELS_STORAGE, ENVDUELS_POSTGRES_URL, DAGSTER_HOME, ...),
exactly as a run worker on another machine would.

    python -m tests.helpers.pair_runs registry              # model_registry + partitions
    python -m tests.helpers.pair_runs authors a,b,c         # authored_environments per author
    python -m tests.helpers.pair_runs pairs a|b,a|c         # duel_episodes per pair
    python -m tests.helpers.pair_runs marts                 # the dbt marts
"""

from __future__ import annotations

import os
import sys

ENVS_PER_AUTHOR, SEEDS = 2, [0, 1]


def main(argv: list[str]) -> int:
    import dagster as dg

    from envduels_dagster.assets.registry.partitions import pair_key, register_models
    from envduels_dagster.core.models.registry import load_registry
    from envduels_dagster.definitions import build_definitions, build_resources
    from envduels_dagster.resources import DuelSettings
    from envduels_dagster.settings.locations import registry_file

    stage, names = argv[0], [n for n in (argv[1] if len(argv) > 1 else "").split(",") if n]
    defs = build_definitions()
    by_name = {k.to_user_string(): a for a in defs.assets for k in a.keys}
    resources = build_resources(settings=DuelSettings(envs_per_author=ENVS_PER_AUTHOR, benchmark_seeds=SEEDS))
    quiet = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
    with dg.DagsterInstance.get() as instance:
        def run(asset, partition_key=None):
            result = dg.materialize([asset], instance=instance, resources=resources, partition_key=partition_key,
                                    run_config=quiet, raise_on_error=False)
            if not result.success:
                failures = [e.message for e in result.all_events if e.is_failure]
                raise SystemExit(f"{asset.node_def.name} [{partition_key}] failed (run {result.run_id}, storage "
                                 f"{os.environ.get('ENVDUELS_STORAGE', 'embedded')}): {failures}")

        if stage == "registry":
            register_models(instance, load_registry(registry_file()).names)
            run(by_name["model_registry"])
        elif stage == "authors":
            for author in names:
                run(by_name["authored_environments"], author)
        elif stage == "pairs":
            for pair in names:
                author, solver = pair.split("|")
                run(by_name["duel_episodes"], pair_key(author, solver))
        elif stage == "marts":
            from envduels_dagster.assets.marts.project import prepare_manifest

            prepare_manifest()
            run(by_name["pair_lift"])
        else:
            raise SystemExit(f"unknown stage {stage!r}")
    print(f"{stage} done in pid {os.getpid()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
