"""``duel_episodes``: a solver plays every valid environment of an author, cold and hinted."""


import asyncio
import time

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.authoring import authored_environments
from envduels_dagster.assets.common import OWNERS, markdown_table, utcnow
from envduels_dagster.assets.registry import model_registry
from envduels_dagster.core.adaptive import AdaptivePolicy, play_pair_adaptive
from envduels_dagster.core.episodes import play_pair
from envduels_dagster.core.models import LLMError, run_and_close
from envduels_dagster.core.registry import RegistryError
from envduels_dagster.core.stats import pair_lift
from envduels_dagster.core.warehouse import episodes_frame, read_table, replace_rows, specs_from_rows
from envduels_dagster.jobs import WAIT_TAG
from envduels_dagster.partitions import by_author, pair_partitions

WAIT_RETRIES, WAIT_SECONDS = 40, 15  # sensor-launched pairs wait up to 10 min for their author
from envduels_dagster.resources import DuelSettings, GatewayResource, SandboxResource


@dg.asset(
    partitions_def=pair_partitions,
    deps=[model_registry,
          dg.AssetDep(authored_environments,
                      partition_mapping=by_author)],
    group_name="duel", kinds={"python", "duckdb"}, owners=OWNERS, tags={"layer": "core"},
    description="Episodes of one (author, solver) pair: every valid environment of the author x its benchmark "
                "seeds x {cold, hinted}. Self pairs are played and flagged. Table `episodes`.",
)
def duel_episodes(context: dg.AssetExecutionContext, gateway: GatewayResource, sandbox: SandboxResource,
                  settings: DuelSettings, warehouse: DuckDBResource) -> dg.MaterializeResult:
    keys = context.partition_key.keys_by_dimension
    return play_round_pair(context, keys["author"], keys["solver"], 0, gateway, sandbox, settings, warehouse)


def play_round_pair(context: dg.AssetExecutionContext, author: str, solver: str, round_: int,
                    gateway: GatewayResource, sandbox: SandboxResource, settings: DuelSettings,
                    warehouse: DuckDBResource) -> dg.MaterializeResult:
    """Play every valid round-``round_`` environment of ``author`` with ``solver``; replace the pair's rows."""
    registry = gateway.registry()
    solver_entry = registry.get(solver)
    with warehouse.get_connection() as conn:
        env_rows = read_table(conn, "environments", {"author": author, "round": round_})
    author_version = registry.get(author).version
    current = not env_rows.empty and set(env_rows["author_version"]) == {author_version}
    upstream = "authored_environments" if round_ == 0 else f"hardened_environments_r{round_}"
    if not current and context.run.tags.get(WAIT_TAG) == "true":
        # Launched with the author's run by a sensor/schedule: wait for its environments to land.
        context.log.info(f"waiting for {upstream}[{author}] version {author_version}")
        raise dg.RetryRequested(max_retries=WAIT_RETRIES, seconds_to_wait=WAIT_SECONDS)
    if env_rows.empty:
        raise dg.Failure(f"no round-{round_} environments for author {author!r}: materialize {upstream}[{author}] first")
    if not current:
        context.log.warning(f"playing {author}'s environments from an older version than the registry's "
                            f"{author_version!r}; re-materialize {upstream}[{author}] to refresh")
    envs = specs_from_rows(env_rows)
    gw = gateway.gateway(registry)
    t0 = time.perf_counter()
    last = [0.0]

    def progress(done: int, total: int) -> None:
        if done == total or time.perf_counter() - last[0] > 5:
            last[0] = time.perf_counter()
            context.log.info(f"{author} x {solver} (round {round_}): {done}/{total} episodes")

    adaptive: dict = {}
    try:
        if settings.adaptive_sampling:
            records, decisions = asyncio.run(run_and_close(gw, play_pair_adaptive(
                gw, solver, envs, AdaptivePolicy(confidence=settings.adaptive_confidence,
                                                 max_seeds=settings.adaptive_max_seeds,
                                                 max_cold=settings.training_max_cold,
                                                 min_hint=settings.training_min_hint),
                sandbox.limits(), settings.episode_concurrency, settings.episode_budget_s,
                reuse_sandboxes=settings.reuse_sandboxes)))
            adaptive = {"adaptive_seeds_played": sum(len(d.seeds_played) for d in decisions),
                        "adaptive_seeds_fixed": sum(len(e.benchmark_seeds) for e in envs if e.valid)}
        else:
            records = asyncio.run(run_and_close(gw, play_pair(
                gw, solver, envs, sandbox.limits(), settings.episode_concurrency, progress, settings.episode_budget_s,
                reuse_sandboxes=settings.reuse_sandboxes)))
    except (LLMError, RegistryError) as exc:
        raise dg.Failure(f"model {solver!r} cannot be called, nothing was written: {exc}") from None
    llm_failed = [r for r in records if r.stop_reason == "llm_error"]
    if records and len(llm_failed) == len(records):
        raise dg.Failure(f"every episode of {author} x {solver} failed to reach the model; nothing was written. "
                         f"First error: {llm_failed[0].error}")
    df = episodes_frame(records, {e.env_id: e.max_turns for e in envs}, solver_entry.version, utcnow(),
                        {e.env_id: e.round for e in envs})
    with warehouse.get_connection() as conn:
        replace_rows(conn, "episodes", df, {"author": author, "solver": solver, "round": round_})
    done = df[df["status"] != "incomplete"]
    rates = done.groupby("condition")["status"].apply(lambda s: (s == "success").mean()).to_dict()
    lift = pair_lift(df)
    return dg.MaterializeResult(metadata={
        "num_rows": len(df),
        "valid_envs": sum(e.valid for e in envs),
        "incomplete": int((df["status"] == "incomplete").sum()),
        "pass_rate_cold": float(rates.get("cold", 0.0)),
        "pass_rate_hinted": float(rates.get("hinted", 0.0)),
        "lift": float(lift["lift"].iloc[0]) if len(lift) else 0.0,
        "is_self_pair": author == solver,
        "cost_usd": float(df["cost_usd"].sum()),
        "retries": int(df["retries"].sum()),
        "tokens": int(df["prompt_tokens"].sum() + df["completion_tokens"].sum()),
        "model_calls": sum(gw.stats.backend_calls.values()),
        "cache_hits": sum(gw.stats.cache_hits.values()),
        "seconds": round(time.perf_counter() - t0, 2),
        **adaptive,
        "stop_reasons": dg.MetadataValue.md(markdown_table(
            df.groupby(["condition", "stop_reason"]).size().rename("episodes").reset_index())),
    })
