"""Checks on the environments assets (table ``environments``), per author partition and round.

``authored_environments`` writes round 0; the co-evolution rounds' ``hardened_environments_r{r}``
write round r of the same table. ``make_environments_checks`` builds the same suite for each.
"""


import hashlib

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.checking.catalog import (
    Catalog,
    MissingTable,
    load_or_error,
    missing_table_message,
    partition_keys,
    query,
    spec,
)
from envduels_dagster.assets.checking.gx_runner import Frame, Rule, failed_results, run_suite

ASSET = dg.AssetKey(["authored_environments"])  # round 0
MAX_TURNS_RANGE = (1, 200)  # EnvironmentSpec.max_turns: Field(ge=1, le=200)

CHECKS = {
    "env_ids_unique": "env_id is non-null and unique across the warehouse; rows belong to the author partition.",
    "source_sha256_matches_source": "source_sha256 equals sha256(source) for every environment.",
    "valid_envs_have_hint": "Every valid environment carries a non-empty privileged hint.",
    "rejected_envs_have_reason": "Every rejected environment states its reject_reason (never silently dropped).",
    "max_turns_in_range": f"max_turns is set and within {MAX_TURNS_RANGE[0]}..{MAX_TURNS_RANGE[1]}.",
}
NAMES = list(CHECKS)


def _sha(text) -> str | None:
    return hashlib.sha256(text.encode("utf-8")).hexdigest() if isinstance(text, str) else None


def _chars(value) -> int:
    return len(value.strip()) if isinstance(value, str) else 0


def load_frames(conn, author: str, round_: int = 0) -> list[Frame]:
    """Read the author's round-``round_`` rows of ``environments`` and build the frame the suite validates."""
    cat = Catalog(conn)
    table = cat.table("environments")
    if table is None:
        raise MissingTable(missing_table_message("environments", "authored_environments"))
    in_round = "AND e.round = ?" if "round" in cat.columns("environments") else ""
    df = query(conn, f"""
        SELECT e.env_id, e.author, e.valid, e.max_turns, e.source, e.source_sha256, e.hint, e.reject_reason,
               (SELECT count(*) FROM {table} o WHERE o.env_id = e.env_id) AS copies_in_warehouse
        FROM {table} e WHERE e.author = ? {in_round} ORDER BY e.env_id""", [author, round_][: 2 if in_round else 1])
    df["sha256_of_source"] = df["source"].map(_sha)
    df["hint_chars"] = df["hint"].map(_chars)
    df["reject_reason_chars"] = df["reject_reason"].map(_chars)
    df = df.drop(columns=["source", "hint"])

    rules = [
        Rule("env_ids_unique", "ExpectColumnValuesToNotBeNull", {"column": "env_id"}, "env_id is set"),
        Rule("env_ids_unique", "ExpectColumnValuesToBeUnique", {"column": "env_id"},
             "env_id is unique within the author's environments"),
        Rule("env_ids_unique", "ExpectColumnValuesToBeBetween",
             {"column": "copies_in_warehouse", "min_value": 1, "max_value": 1},
             "env_id appears exactly once in the warehouse"),
        Rule("env_ids_unique", "ExpectColumnValuesToBeInSet", {"column": "author", "value_set": [author]},
             f"rows belong to author partition {author!r}"),
        Rule("source_sha256_matches_source", "ExpectColumnPairValuesToBeEqual",
             {"column_A": "source_sha256", "column_B": "sha256_of_source"}, "source_sha256 equals sha256(source)"),
        Rule("valid_envs_have_hint", "ExpectColumnValuesToNotBeNull", {"column": "valid"}, "valid is set"),
        Rule("valid_envs_have_hint", "ExpectColumnValuesToBeBetween",
             {"column": "hint_chars", "min_value": 1}, "valid environments have a non-empty hint",
             where=(("valid", "==", True),)),
        Rule("rejected_envs_have_reason", "ExpectColumnValuesToBeBetween",
             {"column": "reject_reason_chars", "min_value": 1}, "rejected environments state a reject_reason",
             where=(("valid", "==", False),)),
        Rule("max_turns_in_range", "ExpectColumnValuesToNotBeNull", {"column": "max_turns"}, "max_turns is set"),
        Rule("max_turns_in_range", "ExpectColumnValuesToBeBetween",
             {"column": "max_turns", "min_value": MAX_TURNS_RANGE[0], "max_value": MAX_TURNS_RANGE[1]},
             f"max_turns is within {MAX_TURNS_RANGE[0]}..{MAX_TURNS_RANGE[1]}"),
    ]
    return [Frame("environments", df, rules, index=["env_id"])]


def validate_frames(frames, author: str, asset: dg.AssetKey = ASSET) -> list[dg.AssetCheckResult]:
    if isinstance(frames, MissingTable):
        return failed_results(asset, NAMES, str(frames), partition=author)
    return run_suite(asset, NAMES, "environments_suite", frames, partition=author)


def evaluate_environments(conn, author: str, round_: int = 0) -> list[dg.AssetCheckResult]:
    """Validate the round-``round_`` environments of ``author`` (one partition of an environments asset)."""
    return validate_frames(load_or_error(load_frames, conn, author, round_), author)


def make_environments_checks(asset: dg.AssetsDefinition, round_: int = 0) -> dg.AssetChecksDefinition:
    """The environments suite for ``asset`` (which writes round ``round_``), partitioned like the asset."""
    key = asset.key

    @dg.multi_asset_check(
        specs=[spec(n, key, d, partitions_def=asset.partitions_def) for n, d in CHECKS.items()],
        name=f"{key.path[-1]}_checks", compute_kind="great_expectations",
        description=f"great-expectations suite over the author's round-{round_} rows of table `environments`.",
    )
    def _checks(context: dg.AssetCheckExecutionContext, warehouse: DuckDBResource):
        author = partition_keys(context)["key"]
        with warehouse.get_connection() as conn:  # read, then release the file before validating
            frames = load_or_error(load_frames, conn, author, round_)
        yield from validate_frames(frames, author, key)

    return _checks
