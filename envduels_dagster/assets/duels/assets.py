"""``duel_episodes``: a solver plays every valid environment of an author, cold and hinted.

Why partitioned by (author, solver): adding a model plays only its 2N+1 new pairs, and
each pair's rows are replaced exactly. :func:`play_round_pair` is shared with every
co-evolution round's pair asset (``assets/rounds``); the policy it applies lives in
``core/play/pair.py``.

Why a run may hold many pairs (:func:`play_pairs`): a run costs seconds of orchestration for a pair
that plays in about one, so the request sensor and backfills (``PAIR_BACKFILL_POLICY``) send ranges
of pairs. Each pair of the range is still played and written on its own (replace_rows per author,
solver and round) and gets its own materialization with its own metadata; a pair that fails does not
stop the others, whose rows and materializations stay, and the run then fails naming the failed pairs.
"""

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import time
from collections.abc import Callable

import dagster as dg
from dagster._core.definitions.data_version import DATA_VERSION_IS_USER_PROVIDED_TAG, DATA_VERSION_TAG
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.authoring.assets import authored_environments
from envduels_dagster.assets.registry.assets import model_registry
from envduels_dagster.assets.registry.partitions import by_author, pair_partitions
from envduels_dagster.assets.shared import (
    OWNERS,
    documented_schema,
    markdown_table,
    rounded_metadata,
    table_metadata,
    table_version,
    utcnow,
)
from envduels_dagster.resources import DuelSettings, GatewayResource, SandboxResource

# Backfills launched from the UI: at most this many pairs per run (the sensor batches its own stages,
# assets/registry/requests.py). Dagster cuts a multi-partition backfill into ranges along one author
# (or solver), so a run holds at most one row of the pair matrix.
PAIR_BACKFILL_POLICY = dg.BackfillPolicy.multi_run(max_partitions_per_run=100)


@dg.asset(
    partitions_def=pair_partitions,
    deps=[model_registry, dg.AssetDep(authored_environments, partition_mapping=by_author)],
    group_name="duel", kinds={"python", "duckdb"}, owners=OWNERS, tags={"layer": "core"}, code_version="1",
    metadata={"dagster/column_schema": documented_schema("episodes")},
    description="Episodes of one (author, solver) pair: every valid environment of the author x its benchmark "
                "seeds x {cold, hinted}. Self pairs are played and flagged. Table `episodes`.",
    backfill_policy=PAIR_BACKFILL_POLICY,
)
def duel_episodes(context: dg.AssetExecutionContext, gateway: GatewayResource, sandbox: SandboxResource,
                  settings: DuelSettings, warehouse: DuckDBResource) -> dg.MaterializeResult:
    return play_pairs(context, 0, gateway, sandbox, settings, warehouse)


def play_pairs(context: dg.AssetExecutionContext, round_: int, gateway: GatewayResource, sandbox: SandboxResource,
               settings: DuelSettings, warehouse: DuckDBResource) -> dg.MaterializeResult:
    """Play the run's pair, or every pair of its partition range, each written and recorded on its own.

    A range's pairs play at once (issue 35), as many as keep every solver provider's pool full (each
    episode in play holds one of its provider's episode slots while it plays,
    ``core/play/pair.provider_slots``), in one event loop through one gateway, whose one pool per
    provider (``max_in_flight``) caps the calls in flight across them. Each pair is still written as
    soon as it finishes, and one pair's failure does not stop the others.
    """
    if context.has_partition_key:
        return play_round_pair(context, round_, gateway, sandbox, settings, warehouse)
    from envduels_dagster.core.models import run_and_close
    from envduels_dagster.core.play.pair import Slots, provider_slots

    pairs = [str(k) for k in context.partition_keys]
    done: dict[str, dict] = {}
    failed: dict[str, str] = {}
    t0 = time.perf_counter()
    registry = gateway.registry()
    gw = gateway.gateway(registry)
    jobs = {}
    with warehouse.get_connection() as conn:  # one connection for every pair's reads (closed before play)
        for key in pairs:
            author, solver = key.split("|", 1)
            try:
                jobs[key] = _prepare_pair(context, author, solver, round_, registry, conn)
            except Exception as exc:  # noqa: BLE001 - one pair's failure must not cost the batch's other pairs
                failed[key] = _failure_text(exc)
    slots_of: dict[str, int] = {}
    for job in jobs.values():
        try:
            slots_of.update(provider_slots(registry, [job.solver]))
        except Exception:  # noqa: BLE001 - a solver missing from the registry fails its own pair below
            pass
    context.log.info(f"{len(pairs)} pairs, played at once in episode slots per provider: {slots_of}")

    async def play_all() -> None:
        slots = {provider: Slots(n) for provider, n in slots_of.items()}
        alone = Slots(1)

        async def one(key: str, job: _PairJob) -> None:
            try:
                gate = slots[registry.get(job.solver).provider]
            except Exception:  # noqa: BLE001 - it fails when played, below
                gate = alone
            try:
                options = pair_options(settings, sandbox.limits(), gate.one)
                result = await _play_and_write(context, job, gw, options, warehouse, writer)
            except Exception as exc:  # noqa: BLE001 - isolated per pair, as above
                failed[key] = _failure_text(exc)
                context.log.error(f"pair {key} failed: {failed[key]}")
                return
            version = result.data_version.value if result.data_version is not None else ""
            done[key] = {**(result.metadata or {}), "pair_data_version": version}
            context.log.info(f"pair {key} written ({len(done) + len(failed)}/{len(pairs)}, "
                             f"{time.perf_counter() - t0:.1f}s)")

        await asyncio.gather(*(one(k, j) for k, j in jobs.items()))

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="envduels-writer") as writer:
        asyncio.run(run_and_close(gw, play_all()))
    done = {k: done[k] for k in pairs if k in done}  # partition order, whatever order they finished in
    if failed:  # record the finished pairs one by one, then fail the run naming the others
        for key, metadata in done.items():
            context.log_event(dg.AssetMaterialization(
                context.asset_key, partition=key, metadata=metadata,
                tags={DATA_VERSION_TAG: metadata["pair_data_version"], DATA_VERSION_IS_USER_PROVIDED_TAG: "true"}))
        failed = {k: failed[k] for k in pairs if k in failed}
        raise dg.Failure(f"{len(failed)} of {len(pairs)} pairs failed; the other {len(done)} were written and "
                         f"materialized. Re-execute this run to replay the batch (rows are replaced, never "
                         f"duplicated): " + "; ".join(f"{k}: {v}" for k, v in failed.items()),
                         metadata={"failed_pairs": dg.MetadataValue.json(failed)})
    for key, metadata in done.items():  # one materialization per pair, each with its own metadata
        context.add_asset_metadata(metadata, partition_key=key)
    # Dagster gives every partition of a ranged run one data version: the batch's, a hash of its pairs'
    # own versions (each pair's is in its metadata, `pair_data_version`). An unchanged replay keeps it.
    batch_version = hashlib.sha256("\n".join(f"{k}={m['pair_data_version']}" for k, m in sorted(done.items()))
                                   .encode()).hexdigest()[:16]
    return dg.MaterializeResult(data_version=dg.DataVersion(batch_version),
                                metadata={"pairs_in_run": len(pairs), "episode_slots": dg.MetadataValue.json(slots_of),
                                          "batch_seconds": round(time.perf_counter() - t0, 2)})


def _failure_text(exc: Exception) -> str:
    return str(exc) if isinstance(exc, dg.Failure) else f"{type(exc).__name__}: {exc}"


def pair_options(settings: DuelSettings, limits=None,
                 slot: Callable[[], contextlib.AbstractAsyncContextManager] | None = None):
    """The engine's options for a pair run, from the ``settings`` resource (adaptive sampling or fixed seeds),
    the sandbox's ``limits`` and the ``slot`` each episode plays inside (its provider's, held only while it plays)."""
    from envduels_dagster.core.play.adaptive import AdaptivePolicy
    from envduels_dagster.core.play.pair import PairOptions

    adaptive = AdaptivePolicy(confidence=settings.adaptive_confidence, max_seeds=settings.adaptive_max_seeds,
                              max_cold=settings.training_max_cold, min_hint=settings.training_min_hint)
    return PairOptions(limits=limits, budget_s=settings.episode_budget_s, concurrency=settings.episode_concurrency,
                       slot=slot, adaptive=adaptive if settings.adaptive_sampling else None)


@dataclasses.dataclass
class _PairJob:
    author: str
    solver: str
    round_: int
    envs: list
    solver_version: str


def _prepare_pair(context: dg.AssetExecutionContext, author: str, solver: str, round_: int, registry,
                  conn) -> _PairJob:
    """Read the pair's environments on ``conn`` and check they can be played (raises dg.Failure when they cannot)."""
    from envduels_dagster.core.authoring.imports import is_import
    from envduels_dagster.core.play.pair import environments_current
    from envduels_dagster.core.storage.warehouse import read_table, specs_from_rows

    solver_entry = registry.get(solver)
    if not solver_entry.solves:  # a partition left from before its roles changed, materialized by hand
        raise dg.Failure(f"model {solver!r} has roles {list(solver_entry.roles)} in {registry.path}: it plays no "
                         f"environments; pair {author}|{solver} was not played and nothing was written")
    env_rows = read_table(conn, "environments", {"author": author, "round": round_})
    # An imported author has no model: its environments are current as imported (version = content digest).
    author_version = (next(iter(set(env_rows["author_version"])), "") if is_import(author)
                      else registry.get(author).version)
    current = environments_current(env_rows, author_version)
    upstream = "authored_environments" if round_ == 0 else f"hardened_environments_r{round_}"
    if env_rows.empty:
        raise dg.Failure(f"no round-{round_} environments for author {author!r}: materialize {upstream}[{author}] first")
    if not current:
        context.log.warning(f"playing {author}'s environments from an older version than the registry's "
                            f"{author_version!r}; re-materialize {upstream}[{author}] to refresh")
    return _PairJob(author, solver, round_, specs_from_rows(env_rows), solver_entry.version)


async def _play_and_write(context: dg.AssetExecutionContext, job: _PairJob, gw, options,
                          warehouse: DuckDBResource, writer: concurrent.futures.Executor) -> dg.MaterializeResult:
    """Play one prepared pair through ``gw`` (shared by the run's pairs) as ``options`` say (:func:`pair_options`;
    the run's progress log is added here), then replace its rows in ``writer``."""
    from envduels_dagster.core.models import LLMError
    from envduels_dagster.core.models.registry import RegistryError
    from envduels_dagster.core.play.pair import (
        AllCallsFailed,
        StoppedAtBudget,
        cut_replies,
        pair_summary,
        play_pair_with,
    )
    from envduels_dagster.core.storage.warehouse import episodes_frame, replace_rows

    author, solver, round_, envs = job.author, job.solver, job.round_, job.envs
    t0 = time.perf_counter()
    last = [0.0]

    def progress(done: int, total: int) -> None:
        if done == total or time.perf_counter() - last[0] > 5:
            last[0] = time.perf_counter()
            context.log.info(f"{author} x {solver} (round {round_}): {done}/{total} episodes")

    try:  # each episode holds its provider slot only while it plays; the pair's write waits outside them
        played = await play_pair_with(gw, author, solver, envs, dataclasses.replace(options, on_progress=progress))
    except (LLMError, RegistryError) as exc:
        raise dg.Failure(f"model {solver!r} cannot be called, nothing was written: {exc}") from None
    except (AllCallsFailed, StoppedAtBudget) as exc:
        raise dg.Failure(str(exc)) from None
    seconds = round(time.perf_counter() - t0, 2)

    def write() -> dg.MaterializeResult:  # blocking DuckDB work: off the event loop, so other pairs play on
        df = episodes_frame(played.records, {e.env_id: e.max_turns for e in envs}, job.solver_version,
                            utcnow(), {e.env_id: e.round for e in envs})
        pair = {"author": author, "solver": solver, "round": round_}
        with warehouse.get_connection() as conn:  # one connection for the write and what is read back
            replace_rows(conn, "episodes", df, pair)
            version, table = table_version(conn, "episodes", where=pair), table_metadata(conn, "episodes", pair)
        calls = sum(r.model_calls for r in played.records)
        hits = sum(r.cached_calls for r in played.records)
        return dg.MaterializeResult(data_version=version, metadata=rounded_metadata({
            **table,
            "num_rows": len(df),
            "valid_envs": sum(e.valid for e in envs),
            "incomplete": int((df["status"] == "incomplete").sum()),
            **pair_summary(df),
            **cut_replies(df, solver),
            "is_self_pair": author == solver,
            "cost_usd": float(df["cost_usd"].sum()),
            "retries": int(df["retries"].sum()),
            "tokens": int(df["prompt_tokens"].sum() + df["completion_tokens"].sum()),
            "model_calls": calls - hits,  # calls that reached a backend (cache hits excluded)
            "cache_hits": hits,
            "seconds": seconds,
            **played.adaptive,
            **budget_metadata(df, gw.ledger),
            "stop_reasons": dg.MetadataValue.md(markdown_table(
                df.groupby(["condition", "stop_reason"]).size().rename("episodes").reset_index())),
        }))

    # one writer thread per run (``writer``): the pairs' writes never run at once (one DuckDB writer)
    return await asyncio.get_running_loop().run_in_executor(writer, write)


def play_round_pair(context: dg.AssetExecutionContext, round_: int, gateway: GatewayResource,
                    sandbox: SandboxResource, settings: DuelSettings, warehouse: DuckDBResource) -> dg.MaterializeResult:
    """Play every valid round-``round_`` environment of the run's pair (its partition key, ``author|solver``)
    with the solver; replace the pair's rows."""
    from envduels_dagster.core.models import run_and_close

    keys = context.partition_key.keys_by_dimension
    author, solver = keys["author"], keys["solver"]
    registry = gateway.registry()
    with warehouse.get_connection() as conn:
        job = _prepare_pair(context, author, solver, round_, registry, conn)
    gw = gateway.gateway(registry)
    options = pair_options(settings, sandbox.limits())
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="envduels-writer") as writer:
        return asyncio.run(run_and_close(gw, _play_and_write(context, job, gw, options, warehouse, writer)))


def budget_metadata(df, ledger=None) -> dict:
    """``stopped_at_budget``: episodes a spending cap cut (incomplete, excluded from every statistic, never
    failures); ``partial``: the pair holds fewer finished episodes than it would have without the cap;
    ``budget_note``: how many, what each cap has left (from the ledger) and what to raise."""
    stopped = int((df["stop_reason"] == "stopped_at_budget").sum())
    left = f" ({ledger.left()})" if stopped and ledger is not None else ""
    return {"stopped_at_budget": stopped, "partial": stopped > 0,
            **({"budget_note": f"{stopped} episode(s) stopped at budget{left}: raise budget_usd / ENVDUELS_BUDGET_USD "
                               "and re-materialize this pair; calls already made come from the call cache"}
               if stopped else {})}
