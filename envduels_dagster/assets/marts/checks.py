"""Checks on the ``pair_lift`` mart (table ``pair_lift``), whichever code builds it (Python or dbt).

The asset is referenced by key only (``AssetKey(["pair_lift"])``) and the table is
looked up by name in any schema, so the checks keep working when the mart moves to
dbt. Columns beyond the contract's core are optional: their rules are skipped, and
reported as skipped, when a column is absent.

The cross-check that incomplete episodes are never counted recomputes, from the
``episodes`` table, the number of matched seeds (both conditions completed; the one
definition in ``core/stats/matched_sql.py``), the number of incomplete episodes and the
lift (mean over environments of the mean matched-seed difference, DESIGN §6) per pair,
and compares them with the mart.
"""


import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.checking.catalog import (
    Catalog,
    MissingTable,
    load_or_error,
    missing_table_message,
    query,
    spec,
)
from envduels_dagster.assets.checking.gx_runner import Frame, Rule, failed_results, run_suite
from envduels_dagster.resources import DuelSettings

ASSET = dg.AssetKey(["pair_lift"])
# The published interval is lift_ci_* (Student t over environments); lift_boot_* is a diagnostic nobody reads.
REQUIRED = ["author", "solver", "lift", "lift_ci_lower", "lift_ci_upper", "lift_ci_reason", "n_matched"]
CI = ("lift_ci_lower", "lift_ci_upper")
TOLERANCE = 1e-6
MISSING_VALUE = 1e9  # stands in for "cannot be recomputed" so the comparison fails visibly

CHECKS = {
    "lift_in_range": "lift is set and in [-1, 1], so are lift_ci_lower and lift_ci_upper where given; p_cold and "
                     "p_hint in [0, 1].",
    "interval_contains_estimate": "The published interval (lift_ci_lower, lift_ci_upper) is given exactly when "
                                  "lift_ci_reason is NULL and then lift_ci_lower <= lift <= lift_ci_upper.",
    "every_model_present": "Every registry model appears: one row per (round, author with valid environments in "
                           "that round, solver-role model) peer pair, no duplicate pairs, no model missing from the "
                           "registry.",
    "sample_size_minimum": "Every pair has at least DuelSettings.check_min_matched_seeds matched seeds.",
    "incomplete_excluded": "n_matched, n_incomplete and lift equal their recomputation from completed, matched "
                           "episodes: incomplete episodes, and seeds the adaptive sampler played conditionally "
                           "(episodes.sampling = 'adaptive'), are never counted.",
}
NAMES = list(CHECKS)
WARN = frozenset({"every_model_present", "sample_size_minimum"})


def load_frames(conn, min_matched: int) -> tuple[list[Frame], dict]:
    import pandas as pd

    from envduels_dagster.core.stats.matched_sql import COMMITTED, matched_seeds_sql  # (imports numpy: lazily)

    cat = Catalog(conn)
    table = cat.table("pair_lift")
    if table is None:
        raise MissingTable(missing_table_message("pair_lift", "pair_lift"))
    cols = cat.columns("pair_lift")
    missing = [c for c in REQUIRED if c not in cols]
    if missing:
        raise MissingTable(f"table pair_lift lacks required column(s) {', '.join(missing)}")
    df = query(conn, f"SELECT * FROM {table} ORDER BY ALL")
    episodes = cat.table("episodes")
    if episodes is None:
        raise MissingTable(missing_table_message("episodes", "duel_episodes"))
    # Pairs are keyed by (round, author, solver) (the contract), or (author, solver) for a mart without rounds.
    keys = (["round"] if "round" in cols and "round" in cat.columns("episodes") else []) + ["author", "solver"]
    k = ", ".join(keys)
    # Seeds the adaptive sampler played conditionally (sampling = 'adaptive') never enter the mart.
    committed = COMMITTED if "sampling" in cat.columns("episodes") else "TRUE"
    expected = query(conn, f"""
        WITH matched AS ({matched_seeds_sql(episodes, ["env_id", *keys], committed)}),
        per_env AS (
            SELECT {k}, env_id, avg(y_hint - y_cold) AS env_lift, count(*) AS n
            FROM matched GROUP BY {k}, env_id),
        pairs AS (
            SELECT {k}, sum(n)::BIGINT AS expected_matched, avg(env_lift) AS expected_lift
            FROM per_env GROUP BY {k}),
        inc AS (
            SELECT {k}, count(*) AS expected_incomplete
            FROM {episodes} WHERE status = 'incomplete' AND {committed} GROUP BY {k})
        SELECT {", ".join(f"coalesce(p.{c}, i.{c}) AS {c}" for c in keys)},
               coalesce(p.expected_matched, 0) AS expected_matched, p.expected_lift,
               coalesce(i.expected_incomplete, 0) AS expected_incomplete
        FROM pairs p FULL OUTER JOIN inc i ON {" AND ".join(f"p.{c} = i.{c}" for c in keys)}""")
    df = df.merge(expected, on=keys, how="left")
    df["expected_matched"] = df["expected_matched"].fillna(0).astype(int)
    df["expected_incomplete"] = df["expected_incomplete"].fillna(0).astype(int)
    df["lift_error"] = (df["lift"].astype(float).fillna(MISSING_VALUE)
                        - df["expected_lift"].astype(float).fillna(-MISSING_VALUE)).abs()
    df["lift_minus_lower"] = df["lift"].astype(float) - df["lift_ci_lower"].astype(float)
    df["upper_minus_lift"] = df["lift_ci_upper"].astype(float) - df["lift"].astype(float)
    given = df["lift_ci_lower"].notna() & df["lift_ci_upper"].notna()
    absent = df["lift_ci_lower"].isna() & df["lift_ci_upper"].isna()
    reason = df["lift_ci_reason"].notna() & (df["lift_ci_reason"].astype(str) != "")
    df["interval_or_reason"] = (given & ~reason) | (absent & reason)
    df["pair"] = df[keys].astype(str).agg("|".join, axis=1) if len(df) else pd.Series(dtype=str)

    registry = cat.table("model_registry")
    models_from = "model_registry"
    solvers = None  # with roles (core/requests/roster.py): only models with the solver role play
    if registry is not None:
        models = [r[0] for r in conn.execute(f"SELECT name FROM {registry} ORDER BY name").fetchall()]
        if "roles" in cat.columns("model_registry"):
            from envduels_dagster.core.requests.roster import roster_from_table

            solvers = set(roster_from_table(conn.execute(f"SELECT name, roles FROM {registry}").fetchall()).solvers)
    else:  # fall back to the models that played
        models_from = "episodes (model_registry table absent)"
        models = sorted({r[0] for r in conn.execute(
            f"SELECT author FROM {episodes} UNION SELECT solver FROM {episodes}").fetchall()})
    envs = cat.table("environments")
    # Expected peer pairs per round: each author with valid environments in a round x every other model. A
    # mart without a round column (or a warehouse without rounds) is one round, 0.
    by_round = "round" in keys and envs is not None and "round" in cat.columns("environments")
    authors = set() if envs is None else {(r[0], r[1]) for r in conn.execute(
        f"SELECT DISTINCT {'round' if by_round else '0'}, author FROM {envs} WHERE valid").fetchall()}
    cover = ["round", "author", "solver"] if by_round else ["author", "solver"]
    players = [s for s in models if solvers is None or s in solvers]
    expected_pairs = pd.DataFrame([(r, a, s) for r, a in sorted(authors) if a in models for s in players if s != a],
                                  columns=["round", "author", "solver"])[cover]
    rows = df.groupby(cover).size().rename("pair_rows").reset_index()
    coverage = expected_pairs.merge(rows, on=cover, how="left")
    coverage["pair_rows"] = coverage["pair_rows"].fillna(0).astype(int)

    rules = [
        *[Rule("lift_in_range", "ExpectColumnValuesToNotBeNull", {"column": c}, f"{c} is set")
          for c in ("lift",)],
        *[Rule("lift_in_range", "ExpectColumnValuesToBeBetween", {"column": c, "min_value": -1, "max_value": 1},
               f"{c} is in [-1, 1]") for c in ("lift", *CI)],
        *[Rule("lift_in_range", "ExpectColumnValuesToBeBetween", {"column": c, "min_value": 0, "max_value": 1},
               f"{c} is in [0, 1]", requires=(c,)) for c in ("p_cold", "p_hint")],
        Rule("interval_contains_estimate", "ExpectColumnValuesToBeBetween",
             {"column": "lift_minus_lower", "min_value": -TOLERANCE}, "lift_ci_lower <= lift"),
        Rule("interval_contains_estimate", "ExpectColumnValuesToBeBetween",
             {"column": "upper_minus_lift", "min_value": -TOLERANCE}, "lift <= lift_ci_upper"),
        Rule("interval_contains_estimate", "ExpectColumnValuesToBeInSet",
             {"column": "interval_or_reason", "value_set": [True]},
             "both lift_ci bounds given and no reason, or both NULL with lift_ci_reason saying why"),
        Rule("every_model_present", "ExpectCompoundColumnsToBeUnique", {"column_list": keys},
             f"one row per ({', '.join(keys)})"),
        Rule("every_model_present", "ExpectColumnValuesToBeInSet", {"column": "author", "value_set": models},
             f"every author is a registry model (from {models_from})"),
        Rule("every_model_present", "ExpectColumnValuesToBeInSet", {"column": "solver", "value_set": models},
             f"every solver is a registry model (from {models_from})"),
        Rule("sample_size_minimum", "ExpectColumnValuesToBeBetween",
             {"column": "n_matched", "min_value": min_matched}, f"n_matched >= {min_matched} (configured minimum)"),
        Rule("sample_size_minimum", "ExpectColumnValuesToBeBetween", {"column": "n_envs", "min_value": 1},
             "n_envs >= 1", requires=("n_envs",)),
        Rule("incomplete_excluded", "ExpectColumnPairValuesToBeEqual",
             {"column_A": "n_matched", "column_B": "expected_matched"},
             "n_matched equals the matched seeds of completed episodes"),
        Rule("incomplete_excluded", "ExpectColumnPairValuesToBeEqual",
             {"column_A": "n_incomplete", "column_B": "expected_incomplete"},
             "n_incomplete equals the incomplete episodes of the pair", requires=("n_incomplete",)),
        Rule("incomplete_excluded", "ExpectColumnValuesToBeBetween", {"column": "lift_error", "max_value": TOLERANCE},
             "lift equals its recomputation from completed, matched episodes"),
    ]
    coverage_rules = [
        Rule("every_model_present", "ExpectColumnValuesToBeBetween", {"column": "pair_rows", "min_value": 1},
             "every peer pair of registry models (author with valid environments in the round) has a row"),
    ]
    index = ["pair", "lift_ci_lower", "lift", "lift_ci_upper", "lift_ci_reason"]
    summary = {"models": len(models), "expected_peer_pairs": len(coverage), "rows": len(df),
               "min_n_matched": int(df["n_matched"].min()) if len(df) else 0}
    return [Frame("pair_lift", df, rules, index=index),
            Frame("pair_lift_coverage", coverage, coverage_rules, index=cover)], summary


def validate_frames(loaded) -> list[dg.AssetCheckResult]:
    if isinstance(loaded, MissingTable):
        return failed_results(ASSET, NAMES, str(loaded))
    frames, summary = loaded
    extra = {"every_model_present": {"models": summary["models"],
                                     "expected_peer_pairs": summary["expected_peer_pairs"]},
             "sample_size_minimum": {"min_n_matched": summary["min_n_matched"]}}
    return run_suite(ASSET, NAMES, "pair_lift_suite", frames, warn=WARN, extra=extra)


def evaluate_pair_lift(conn, min_matched: int = 4) -> list[dg.AssetCheckResult]:
    """Validate the whole pair_lift mart against the episodes, registry and environments tables."""
    return validate_frames(load_or_error(load_frames, conn, min_matched))


@dg.multi_asset_check(
    specs=[spec(n, ASSET, d) for n, d in CHECKS.items()],
    name="pair_lift_checks", compute_kind="great_expectations",
    description="great-expectations suite over table `pair_lift`, cross-checked against `episodes`.",
)
def pair_lift_checks(warehouse: DuckDBResource, settings: DuelSettings):
    with warehouse.get_connection() as conn:  # read, then release the file before validating
        loaded = load_or_error(load_frames, conn, settings.check_min_matched_seeds)
    yield from validate_frames(loaded)

