"""Checks on the episodes assets (table ``episodes``), per (author, solver) partition and round.

``duel_episodes`` writes round 0; the co-evolution rounds' ``duel_episodes_r{r}`` write round
r of the same table. ``make_episodes_checks`` builds the same suite for each.

Incomplete episodes (env_error/llm_error/length/stopped_at_budget) are infrastructure outcomes: they must be
marked as such here; that they are never counted in a statistic is checked on
``pair_lift`` (its ``n_matched``/``n_incomplete``/``lift`` are recomputed from these rows).
"""


import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.checking.catalog import (
    CONDITIONS,
    INCOMPLETE_STOP_REASONS,
    STATUSES,
    STOP_REASONS,
    Catalog,
    MissingTable,
    load_or_error,
    missing_table_message,
    partition_keys,
    query,
    spec,
)
from envduels_dagster.assets.checking.gx_runner import Frame, Rule, failed_results, run_suite
from envduels_dagster.assets.checking.secret_scan import env_secret_values, find_secret_in

ASSET = dg.AssetKey(["duel_episodes"])  # round 0
PAIRED = "+".join(sorted(CONDITIONS))  # "cold+hinted"
NULL = "<null>"

CHECKS = {
    "values_in_allowed_sets": "status, condition and stop_reason take allowed values; author, solver and "
                              "is_self_pair match the partition.",
    "success_requires_terminal_stop": "A success ends with stop_reason 'terminated' and a positive final reward.",
    "turns_within_max_turns": "turns <= max_turns.",
    "conditions_paired": "BLOCKING: every (environment, solver, seed) has exactly one cold and one hinted episode "
                         "(a failure stops the run, so no mart is built on unpaired or duplicated rows).",
    "seeds_covered": "Every valid environment x benchmark seed of the author was played (with adaptive sampling on, "
                     "the seeds it settled early are reported here by design).",
    "incomplete_episodes_flagged": "Incomplete episodes, and only they, stop with env_error/llm_error/length/"
                                   "stopped_at_budget and carry an error message.",
    "no_secrets_in_transcripts": "No API keys or other secret-looking strings in transcripts or errors "
                                 "(including the value of any registry api_key_env variable).",
}
NAMES = list(CHECKS)
# Issue 33: an import with benchmark_seeds [0, 0, 0, 1] stored 3 episodes per (seed 0, condition), which fed
# the marts because this check did not block. Coverage is a separate, non-blocking check: adaptive sampling
# leaves settled seeds unplayed on purpose.
BLOCKING = frozenset({"conditions_paired"})


def load_frames(conn, author: str, solver: str, round_: int = 0) -> list[Frame]:
    import pandas as pd

    cat = Catalog(conn)
    table = cat.table("episodes")
    if table is None:
        raise MissingTable(missing_table_message("episodes", "duel_episodes"))
    in_round = "AND round = ?" if "round" in cat.columns("episodes") else ""
    df = query(conn, f"""
        SELECT env_id, author, solver, condition, seed, status, stop_reason, turns, max_turns, final_reward,
               is_self_pair, error, transcript
        FROM {table} WHERE author = ? AND solver = ? {in_round}
        ORDER BY env_id, seed, condition""", [author, solver, round_][: 3 if in_round else 2])
    registry = cat.table("model_registry")
    key_names = [] if registry is None else [r[0] for r in conn.execute(
        f"SELECT DISTINCT api_key_env FROM {registry} WHERE api_key_env IS NOT NULL").fetchall()]
    envs_table = cat.table("environments")
    expected = pd.DataFrame(columns=["env_id", "seed", "condition"])
    if envs_table is not None:
        env_round = "AND round = ?" if "round" in cat.columns("environments") else ""
        expected = query(conn, f"""
            SELECT env_id, seed, condition
            FROM (SELECT env_id, unnest(benchmark_seeds) AS seed FROM {envs_table}
                  WHERE author = ? AND valid {env_round})
            CROSS JOIN (SELECT unnest(?::VARCHAR[]) AS condition)""",
                         [author, round_, CONDITIONS] if env_round else [author, CONDITIONS])

    env_values = env_secret_values(key_names)
    df["secret_found"] = [find_secret_in((t, e), env_values) for t, e in zip(df["transcript"], df["error"])]
    df["error_chars"] = df["error"].map(lambda v: len(v.strip()) if isinstance(v, str) else 0)
    df = df.drop(columns=["transcript"])
    seen: dict[tuple, set] = {}
    for key, cond in zip(zip(df["env_id"], df["solver"], df["seed"]), df["condition"]):
        seen.setdefault(key, set()).add(str(cond))
    df["conditions_for_seed"] = ["+".join(sorted(seen[k])) for k in zip(df["env_id"], df["solver"], df["seed"])]
    for column in ("status", "condition", "stop_reason"):  # a missing value fails the allowed-set rule
        df[column] = df[column].fillna(NULL)
    df["pair"] = df["author"].astype(str) + "|" + df["solver"].astype(str) + "|self=" + df["is_self_pair"].astype(str)
    pair = f"{author}|{solver}|self={author == solver}"
    counts = df.groupby(["env_id", "seed", "condition"]).size().rename("episodes").reset_index()
    coverage = expected.merge(counts, on=["env_id", "seed", "condition"], how="left")
    coverage["episodes"] = coverage["episodes"].fillna(0).astype(int)

    success = (("status", "==", "success"),)
    incomplete = (("status", "==", "incomplete"),)
    rules = [
        Rule("values_in_allowed_sets", "ExpectColumnValuesToBeInSet", {"column": "status", "value_set": STATUSES},
             f"status is one of {', '.join(STATUSES)}"),
        Rule("values_in_allowed_sets", "ExpectColumnValuesToBeInSet",
             {"column": "condition", "value_set": CONDITIONS}, f"condition is one of {', '.join(CONDITIONS)}"),
        Rule("values_in_allowed_sets", "ExpectColumnValuesToBeInSet",
             {"column": "stop_reason", "value_set": STOP_REASONS}, f"stop_reason is one of {', '.join(STOP_REASONS)}"),
        Rule("values_in_allowed_sets", "ExpectColumnValuesToBeInSet", {"column": "pair", "value_set": [pair]},
             f"author, solver and is_self_pair match the partition ({pair})"),
        Rule("success_requires_terminal_stop", "ExpectColumnValuesToBeInSet",
             {"column": "stop_reason", "value_set": ["terminated"]},
             "successful episodes end with stop_reason 'terminated'", where=success),
        Rule("success_requires_terminal_stop", "ExpectColumnValuesToBeBetween",
             {"column": "final_reward", "min_value": 0, "strict_min": True},
             "successful episodes end with a positive reward", where=success),
        Rule("turns_within_max_turns", "ExpectColumnPairValuesAToBeGreaterThanB",
             {"column_A": "max_turns", "column_B": "turns", "or_equal": True}, "turns <= max_turns"),
        Rule("conditions_paired", "ExpectColumnValuesToBeInSet",
             {"column": "conditions_for_seed", "value_set": [PAIRED]},
             "both conditions (cold and hinted) are present for every (env, solver, seed)"),
        Rule("conditions_paired", "ExpectCompoundColumnsToBeUnique",
             {"column_list": ["env_id", "solver", "seed", "condition"]},
             "one episode per (env, solver, seed, condition)"),
        Rule("incomplete_episodes_flagged", "ExpectColumnValuesToBeInSet",
             {"column": "stop_reason", "value_set": INCOMPLETE_STOP_REASONS},
             "incomplete episodes stop with env_error, llm_error, length or stopped_at_budget", where=incomplete),
        Rule("incomplete_episodes_flagged", "ExpectColumnValuesToBeInSet",
             {"column": "status", "value_set": ["incomplete"]},
             "episodes stopped by env_error/llm_error/length/stopped_at_budget are marked incomplete (never counted as failures)",
             where=(("stop_reason", "in", INCOMPLETE_STOP_REASONS),)),
        Rule("incomplete_episodes_flagged", "ExpectColumnValuesToBeBetween",
             {"column": "error_chars", "min_value": 1}, "incomplete episodes carry an error message", where=incomplete),
        Rule("no_secrets_in_transcripts", "ExpectColumnValuesToBeNull", {"column": "secret_found"},
             "transcripts and errors contain no secret-looking strings"),
    ]
    # episodes of the (environment, seed), both conditions together: a seed never played has none
    coverage["seed_episodes"] = coverage.groupby(["env_id", "seed"])["episodes"].transform("sum").astype(int)
    coverage_rules = [
        Rule("conditions_paired", "ExpectColumnValuesToBeBetween",
             {"column": "episodes", "min_value": 0, "max_value": 1},
             "no valid environment x benchmark seed x condition of the author has more than one episode"),
        Rule("seeds_covered", "ExpectColumnValuesToBeBetween", {"column": "seed_episodes", "min_value": 1},
             "every valid environment x benchmark seed of the author was played"),
    ]
    return [Frame("episodes", df, rules, index=["env_id", "seed", "condition"]),
            Frame("episode_coverage", coverage, coverage_rules, index=["env_id", "seed", "condition"])]


def validate_frames(frames, author: str, solver: str, asset: dg.AssetKey = ASSET) -> list[dg.AssetCheckResult]:
    partition = f"{author}|{solver}"
    if isinstance(frames, MissingTable):
        return failed_results(asset, NAMES, str(frames), partition=partition)
    return run_suite(asset, NAMES, "episodes_suite", frames, partition=partition)


def evaluate_episodes(conn, author: str, solver: str, round_: int = 0) -> list[dg.AssetCheckResult]:
    """Validate the round-``round_`` episodes of one (author, solver) pair."""
    return validate_frames(load_or_error(load_frames, conn, author, solver, round_), author, solver)


def log_partition_results(context: dg.AssetCheckExecutionContext, results: list[dg.AssetCheckResult],
                          partition: str) -> None:
    """Record one partition's results in a ranged run, where Dagster gives a yielded result no partition.

    Each becomes an evaluation of ``partition`` tied to that partition's latest materialization (what
    Dagster records for a single-partition run).
    """
    from dagster._core.definitions.asset_checks.asset_check_evaluation import (
        AssetCheckEvaluation,
        AssetCheckEvaluationTargetMaterializationData,
    )

    op_context = context.op_execution_context
    if not results:
        return
    records = op_context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=results[0].asset_key, asset_partitions=[partition]), limit=1).records
    target = None if not records else AssetCheckEvaluationTargetMaterializationData(
        run_id=records[0].run_id, storage_id=records[0].storage_id, timestamp=records[0].timestamp)
    for r in results:
        op_context.log_event(AssetCheckEvaluation(
            asset_key=r.asset_key, check_name=r.check_name, passed=r.passed, metadata=r.metadata,
            target_materialization_data=target, severity=r.severity, description=r.description,
            blocking=r.check_name in BLOCKING, partition=partition))  # type: ignore[arg-type]  # log_event handles it


# Pairs of a ranged run whose rows one connection reads before it is released for their validation:
# one connection instead of one per pair, while only this many pairs' rows are held at once.
READ_CHUNK = 16


def make_episodes_checks(asset: dg.AssetsDefinition, round_: int = 0) -> dg.AssetChecksDefinition:
    """The episodes suite for ``asset`` (which writes round ``round_``), partitioned like the asset.

    A ranged run (a batch of pairs, ``assets/duels/assets.py``) validates every pair of its range and
    records each pair's results on that pair's partition (hence ``can_subset``: the step then yields
    no result of its own).
    """
    key, partitions_def = asset.key, asset.partitions_def

    @dg.multi_asset_check(
        specs=[spec(n, key, d, blocking=n in BLOCKING, partitions_def=partitions_def) for n, d in CHECKS.items()],
        name=f"{key.path[-1]}_checks", compute_kind="great_expectations", can_subset=True,
        description=f"great-expectations suite over the pair's round-{round_} rows of table `episodes`.",
    )
    def _checks(context: dg.AssetCheckExecutionContext, warehouse: DuckDBResource):
        if not context.has_partition_key and context.has_partition_key_range:
            blocked = []
            pairs = [str(p) for p in context.partition_keys]
            for start in range(0, len(pairs), READ_CHUNK):
                chunk = pairs[start:start + READ_CHUNK]
                with warehouse.get_connection() as conn:  # one connection per chunk of pairs, released to validate
                    frames_of = {pair: load_or_error(load_frames, conn, *pair.split("|", 1), round_) for pair in chunk}
                for pair, frames in frames_of.items():
                    author, solver = pair.split("|", 1)
                    results = validate_frames(frames, author, solver, key)
                    log_partition_results(context, results, pair)
                    blocked += [f"{pair}: {r.check_name}" for r in results
                                if r.check_name in BLOCKING and not r.passed]
            if blocked:  # what Dagster does for a failed blocking check of a single-partition run
                raise dg.Failure(f"blocking check failed, so nothing downstream is built on these rows: "
                                 f"{'; '.join(blocked[:5])}")
            return
        keys = partition_keys(context, partitions_def)
        author, solver = keys["author"], keys["solver"]
        with warehouse.get_connection() as conn:  # read, then release the file before validating
            frames = load_or_error(load_frames, conn, author, solver, round_)
        yield from validate_frames(frames, author, solver, key)

    return _checks
