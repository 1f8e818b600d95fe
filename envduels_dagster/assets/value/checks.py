"""Checks on ``author_value`` (table ``author_value``), per learner partition.

Why: the table is purchasing advice; a rank outside 1..n, an interval that does not hold
its estimate, a negative cost, an unpriced author shown with a dollar figure, or an author
silently missing would each send money to the wrong model. Re-derived from the rows and
from ``environments``, independently of the code that built them.
"""

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
from envduels_dagster.assets.value.assets import author_value

ASSET = author_value.key
CHECKS = {
    "ranks_within_range": "Ranked authors have ranks 1..n (n = authors ranked) with rank_lower <= rank_upper; "
                          "unranked ones (self-authored, insufficient data) have none.",
    "intervals_ordered": "Every figure's interval is ordered (lower <= upper), both bounds or neither, and never "
                         "without its estimate.",
    "costs_non_negative": "Calls, tokens and costs are >= 0; an unpriced author has no dollar figure (never free).",
    "every_author_present": "Every author of `environments` has a row for this learner.",
}
NAMES = list(CHECKS)
FIGURES = ("per_env", "per_usd", "per_kcall")


def load_frames(conn, learner: str) -> list[Frame]:
    cat = Catalog(conn)
    table, envs = cat.table("author_value"), cat.table("environments")
    if table is None or envs is None:
        raise MissingTable(missing_table_message("author_value" if table is None else "environments",
                                                 "author_value" if table is None else "authored_environments"))
    df = query(conn, f"SELECT * FROM {table} WHERE learner = ? ORDER BY author", [learner])
    authors = query(conn, f"SELECT DISTINCT author FROM {envs} ORDER BY author")
    n_ranked = int((df["status"] == "ranked").sum())
    for fig in FIGURES:
        est, lo, hi = df[fig], df[f"{fig}_lower"], df[f"{fig}_upper"]
        # both bounds or neither, never a bound without its estimate, lower <= upper (a percentile interval
        # need not hold its estimate: requiring it made the rule true only because the code used to force it)
        df[f"{fig}_ordered"] = (lo.isna() & hi.isna()) | (est.notna() & (lo <= hi))
    df["rank_ordered"] = (df["rank"].isna() & df["rank_lower"].isna() & df["rank_upper"].isna()) | (
        df["rank"].notna() & (df["rank_lower"] <= df["rank_upper"]))
    df["unpriced_has_no_dollars"] = df["priced"] | (df["author_cost_usd"].isna() & df["per_usd"].isna())
    rules = [
        Rule("ranks_within_range", "ExpectColumnValuesToBeBetween",
             {"column": "rank", "min_value": 1, "max_value": max(n_ranked, 1)}, f"rank within 1..{n_ranked}",
             where=(("status", "==", "ranked"),)),
        Rule("ranks_within_range", "ExpectColumnValuesToNotBeNull", {"column": "rank"},
             "every ranked author has a rank", where=(("status", "==", "ranked"),)),
        Rule("ranks_within_range", "ExpectColumnValuesToBeUnique", {"column": "rank"}, "ranks are distinct"),
        Rule("ranks_within_range", "ExpectColumnValuesToBeNull", {"column": "rank"},
             "self-authored and insufficient-data rows are not ranked", where=(("status", "!=", "ranked"),)),
        Rule("ranks_within_range", "ExpectColumnValuesToBeInSet", {"column": "rank_ordered", "value_set": [True]},
             "rank_lower <= rank_upper, set exactly when ranked"),
        *[Rule("intervals_ordered", "ExpectColumnValuesToBeInSet", {"column": f"{fig}_ordered", "value_set": [True]},
               f"{fig}_lower <= {fig}_upper, both or neither, with {fig} set") for fig in FIGURES],
        *[Rule("costs_non_negative", "ExpectColumnValuesToBeBetween", {"column": col, "min_value": 0},
               f"{col} >= 0") for col in ("author_calls", "author_tokens", "author_cost_usd", "eval_calls",
                                           "eval_cost_usd")],
        Rule("costs_non_negative", "ExpectColumnValuesToBeInSet",
             {"column": "unpriced_has_no_dollars", "value_set": [True]},
             "an author without a price has no cost and no per-dollar figure (never shown as free)"),
        Rule("every_author_present", "ExpectColumnValuesToBeInSet", {"column": "learner", "value_set": [learner]},
             f"rows belong to learner partition {learner!r}"),
        Rule("every_author_present", "ExpectColumnValuesToBeUnique", {"column": "author"}, "one row per author"),
    ]
    present = Frame("authors", authors, [
        Rule("every_author_present", "ExpectColumnValuesToBeInSet",
             {"column": "author", "value_set": df["author"].tolist()},
             "every author of `environments` appears in author_value")], index=["author"])
    return [Frame("author_value", df, rules, index=["author"]), present]


def evaluate_author_value(conn, learner: str) -> list[dg.AssetCheckResult]:
    frames = load_or_error(load_frames, conn, learner)
    if isinstance(frames, MissingTable):
        return failed_results(ASSET, NAMES, str(frames), partition=learner)
    return run_suite(ASSET, NAMES, "author_value_suite", frames, partition=learner)


@dg.multi_asset_check(
    specs=[spec(n, ASSET, d, partitions_def=author_value.partitions_def) for n, d in CHECKS.items()],
    name="author_value_checks", compute_kind="great_expectations",
    description="great-expectations suite over the learner's rows of table `author_value`.",
)
def author_value_checks(context: dg.AssetCheckExecutionContext, warehouse: DuckDBResource):
    learner = partition_keys(context)["key"]
    with warehouse.get_connection() as conn:
        frames = load_or_error(load_frames, conn, learner)
    if isinstance(frames, MissingTable):
        yield from failed_results(ASSET, NAMES, str(frames), partition=learner)
        return
    yield from run_suite(ASSET, NAMES, "author_value_suite", frames, partition=learner)
