"""Co-evolution rounds as assets: ``hardened_environments_r{r}`` [author] and ``duel_episodes_r{r}`` [pair],
and ``authoring_progress`` over all rounds.

Why one asset pair per round (and not a round partition dimension): Dagster allows
at most two partition dimensions and the pair already uses both; per-round assets
keep every run incremental (round r+1 of one author re-runs only that author's
partitions), show the round structure in the asset graph, and let round 0 stay
exactly as it is. The number of rounds is ENVDUELS_ROUNDS (default 1), read when the
definitions are built (:func:`round_assets`). All rounds share the ``environments``
and ``episodes`` tables, keyed by their ``round`` column.
"""

import asyncio

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.duels.assets import PAIR_BACKFILL_POLICY, play_pairs
from envduels_dagster.assets.registry.partitions import by_author, models_partitions, pair_partitions
from envduels_dagster.assets.shared import (
    OWNERS,
    documented_schema,
    markdown_table,
    table_metadata,
    table_version,
    utcnow,
)
from envduels_dagster.resources import DuelSettings, GatewayResource, SandboxResource


def make_round_assets(round_: int, previous_pairs: dg.AssetsDefinition) -> list[dg.AssetsDefinition]:
    prev_envs_asset = "authored_environments" if round_ == 1 else f"hardened_environments_r{round_ - 1}"

    @dg.asset(
        name=f"hardened_environments_r{round_}", partitions_def=models_partitions,
        deps=[dg.AssetDep(previous_pairs, partition_mapping=by_author), prev_envs_asset],
        group_name="coevolution", kinds={"python", "duckdb"}, owners=OWNERS, tags={"layer": "core"}, code_version="1",
        metadata={"dagster/column_schema": documented_schema("environments")},
        description=f"Round {round_}: each author sees a digest of how other models played its round-{round_ - 1} "
                    "environments (pass rates, bounded failure excerpts, no other author's hints) and writes a "
                    "hardened version or keeps one, linked by parent_env_id. Same validation as round 0.",
    )
    def hardened(context: dg.AssetExecutionContext, gateway: GatewayResource, sandbox: SandboxResource,
                 settings: DuelSettings, warehouse: DuckDBResource) -> dg.MaterializeResult:
        from envduels_dagster.core.authoring.hardening import harden_author, kept_count, read_hardening_inputs
        from envduels_dagster.core.models import LLMError, run_and_close
        from envduels_dagster.core.models.registry import RegistryError
        from envduels_dagster.core.storage.warehouse import environments_frame, replace_rows

        author = context.partition_key
        registry = gateway.registry()
        with warehouse.get_connection() as conn:
            inputs = read_hardening_inputs(conn, author, round_)
        if not inputs.parents:
            raise dg.Failure(f"no round-{round_ - 1} environments for {author!r}; materialize {prev_envs_asset} first")
        gw = gateway.gateway(registry)
        try:
            children = asyncio.run(run_and_close(gw, harden_author(
                gw, author, round_, inputs, settings.transcript_budget_chars, sandbox.limits())))
        except (LLMError, RegistryError) as exc:
            raise dg.Failure(f"author {author!r} could not be called, nothing was written: {exc}") from None
        df = environments_frame(children, registry.get(author).version, utcnow())
        with warehouse.get_connection() as conn:
            replace_rows(conn, "environments", df, {"author": author, "round": round_})
        kept = kept_count(children)
        partition = {"author": author, "round": round_}
        return dg.MaterializeResult(data_version=table_version(warehouse, "environments", where=partition), metadata={
            **table_metadata(warehouse, "environments", partition),
            "num_rows": len(df), "valid": int(df["valid"].sum()), "kept": kept, "rewritten": len(children) - kept,
            "lineage": dg.MetadataValue.md(markdown_table(df[["parent_env_id", "env_id", "valid", "reject_reason"]])),
            "model_calls": sum(gw.stats.backend_calls.values()),
        })

    @dg.asset(
        name=f"duel_episodes_r{round_}", partitions_def=pair_partitions,
        deps=[dg.AssetDep(hardened, partition_mapping=by_author)],
        group_name="coevolution", kinds={"python", "duckdb"}, owners=OWNERS, tags={"layer": "core"}, code_version="1",
        metadata={"dagster/column_schema": documented_schema("episodes")},
        description=f"Round {round_} episodes of one (author, solver) pair on the hardened environments "
                    f"(rows in `episodes` with round = {round_}).",
        backfill_policy=PAIR_BACKFILL_POLICY,
    )
    def pairs(context: dg.AssetExecutionContext, gateway: GatewayResource, sandbox: SandboxResource,
              settings: DuelSettings, warehouse: DuckDBResource) -> dg.MaterializeResult:
        return play_pairs(context, round_, gateway, sandbox, settings, warehouse)

    return [hardened, pairs]


def round_assets(first_pairs: dg.AssetsDefinition, rounds: int) -> list[dg.AssetsDefinition]:
    out: list[dg.AssetsDefinition] = []
    previous = first_pairs
    for r in range(1, rounds + 1):
        hardened, pairs = make_round_assets(r, previous)
        out += [hardened, pairs]
        previous = pairs
    return out


@dg.asset(
    deps=["duel_episodes"], group_name="coevolution", kinds={"python", "duckdb"}, owners=OWNERS,
    tags={"layer": "mart"}, code_version="4", metadata={"dagster/column_schema": documented_schema("authoring_progress")},
    description="Per author and hardening round: change in design score (peer discrimination) and hint score "
                "(peer lift) from each environment to its hardened child, with 95% t intervals over lineage pairs (NULL "
                "with a reason below 3 pairs or without spread), and the "
                "rank correlation between an author's solver skill and its improvement.",
)
def authoring_progress(warehouse: DuckDBResource) -> dg.MaterializeResult:
    from envduels_dagster.core.rankings.progress import progress_table, skill_change_interval, skill_vs_change
    from envduels_dagster.core.storage.warehouse import read_table, replace_rows

    with warehouse.get_connection() as conn:
        envs = read_table(conn, "environments")
        episodes = read_table(conn, "episodes")
    df = progress_table(envs, episodes)
    with warehouse.get_connection() as conn:
        replace_rows(conn, "authoring_progress", df)
    return dg.MaterializeResult(data_version=table_version(warehouse, "authoring_progress"), metadata={
        **table_metadata(warehouse, "authoring_progress"),
        "num_rows": len(df),
        "progress": dg.MetadataValue.md(markdown_table(df[["author", "round", "n_pairs", "solver_skill",
                                                            "design_change", "hint_change"]])),
        **skill_vs_change(df),
        # percentile intervals of the two rho, their sizes, and why an interval is withheld ("" when published)
        **{k: "" if v is None else v for k, v in skill_change_interval(envs, episodes, progress=df).items()},
    })
