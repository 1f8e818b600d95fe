"""BLOCKING checks on ``training_set`` (table ``training_set``) and ``training_export`` (files), per learner.

A failure stops every downstream step in the same run, so a bad training set is
never published: neither exported nor readable. The checks are also the publish step of the
set's snapshot: only when all four passed does the run's staged snapshot replace the published one
(``assets.shared.publish_if_passed``); a failure discards it, and readers keep the last passing set.
The learner's filter is re-derived from the ``episodes`` table
(completed, matched seeds only, in SQL), independently of the code that built the set.
Under the "probability" admission the check refits the joint prior from those SQL counts
of every learner (the estimator is shared, ``core.stats.joint_admission``; the data path
is not) and requires the recomputed P(learnable) to reach the threshold and to equal the
recorded one; every row must carry a real (non-zero-width) lift interval equal to the one recomputed
from the same counts (``joint_admission.robust_lift_interval``, under either admission method).

The export checks are about file integrity, not a table, so no great-expectations
suite there: the published ``latest`` export must verify against its SHA256SUMS and
the data contract, and its manifest must list exactly the learner's ``training_set``
environments.
"""


from typing import TYPE_CHECKING

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
from envduels_dagster.assets.shared import publish_if_passed
from envduels_dagster.assets.training.assets import training_export, training_set
from envduels_dagster.resources import DuelSettings
from envduels_dagster.resources.io_managers import PublishedTableIOManager

if TYPE_CHECKING:
    from envduels_dagster.core.training.training_set import TrainingRule

ASSET = training_set.key
EXPORT = training_export.key
PARTITIONS = training_set.partitions_def  # the check is partitioned exactly like its asset (learners)
TOLERANCE = 1e-9

CHECKS = {
    "rows_meet_learner_filter": "Every row meets its learner's admission (DuelSettings.training_admission: "
                                "P(learnable) >= training_admission_threshold, or the fixed rule "
                                "training_max_cold / training_min_hint), as recorded and as recomputed from "
                                "the episodes; its lift interval is real, ordered and equal to the one recomputed "
                                "from the episodes.",
    "no_duplicate_environments": "No environment appears twice in a learner's set; rows belong to the partition.",
    "no_self_authored_environments": "No environment authored by its learner, unless "
                                     "DuelSettings.training_include_self_authored.",
    "provenance_matches_environments": "Every row names a valid environment of `environments` with the same "
                                       "author, source_sha256 and hint.",
}
NAMES = list(CHECKS)


def recomputed_admission(conn, episodes: str, envs: str, ts, learner: str, min_hint: float,
                         cold_ceiling: float):
    """P(learnable) and the published lift interval (``joint_admission.robust_lift_interval``) of each ``ts``
    row, from SQL counts of every learner's peer rows (superseded excluded): columns ``p_learnable``,
    ``lift_lower``, ``lift_upper`` (NaN where the learner has no matched seeds)."""
    import numpy as np
    import pandas as pd

    from envduels_dagster.core.stats import joint_admission as ja
    from envduels_dagster.core.stats.matched_sql import matched_seeds_sql

    counts = query(conn, f"""
        WITH superseded AS (SELECT DISTINCT parent_env_id AS env_id FROM {envs}
                            WHERE valid AND parent_env_id IS NOT NULL),
        matched AS ({matched_seeds_sql(episodes, ["env_id", "author", "solver"],
                                       "env_id NOT IN (SELECT env_id FROM superseded)")})
        SELECT env_id, author, solver, sum(y_cold) AS k_cold, sum(y_hint) AS k_hint, count(*) AS n
        FROM matched GROUP BY env_id, author, solver ORDER BY env_id, solver""")
    peer = counts[counts["author"] != counts["solver"]]
    prior = ja.fit_joint_prior(peer["k_cold"], peer["k_hint"], peer["n"])
    mine = counts[counts["solver"] == learner].set_index("env_id").reindex(ts["env_id"])
    have = mine["n"].notna().to_numpy()
    out = pd.DataFrame(np.nan, index=ts.index, columns=["p_learnable", "lift_lower", "lift_upper"])
    if have.any():
        m = mine[have]
        out.loc[have, "p_learnable"] = ja.joint_learnable_probability(prior, m["k_cold"], m["k_hint"], m["n"],
                                                                      cold_ceiling, min_hint)
        lower, upper = ja.robust_lift_interval(prior, m["k_cold"], m["k_hint"], m["n"])
        out.loc[have, "lift_lower"], out.loc[have, "lift_upper"] = lower, upper
    return out


def load_frames(conn, learner: str, rule: "TrainingRule") -> list[Frame]:
    """The learner's training-set rows joined with what the episodes and environments say, as the suite's frames;
    ``rule``: the admission rule the set was built with."""
    import numpy as np  # noqa: PLC0415 - loading the definitions imports no numpy (tests/assets/test_code_location.py)

    max_cold, min_hint, include_self = rule.max_cold, rule.min_hint, rule.include_self_authored
    method, threshold, cold_ceiling = rule.method, rule.threshold, rule.cold_ceiling

    from envduels_dagster.core.stats.matched_sql import matched_seeds_sql

    cat = Catalog(conn)
    table = cat.table("training_set")
    if table is None:
        raise MissingTable(missing_table_message("training_set", "training_set"))
    episodes = cat.table("episodes")
    envs = cat.table("environments")
    if episodes is None or envs is None:
        raise MissingTable(missing_table_message("episodes" if episodes is None else "environments",
                                                 "duel_episodes and authored_environments"))
    df = query(conn, f"""
        WITH ts AS (SELECT * FROM {table} WHERE learner = ?),
        matched AS ({matched_seeds_sql(episodes, ["env_id"], "solver = ? AND env_id IN (SELECT env_id FROM ts)")}),
        observed AS (
            SELECT env_id, avg(y_cold) AS observed_p_cold, avg(y_hint) AS observed_p_hint,
                   count(*) AS observed_n_seeds
            FROM matched GROUP BY env_id),
        env AS (
            SELECT env_id, any_value(author) AS env_author, bool_and(valid) AS env_valid,
                   any_value(source_sha256) AS env_source_sha256, any_value(hint) AS env_hint
            FROM {envs} WHERE env_id IN (SELECT env_id FROM ts) GROUP BY env_id)
        SELECT ts.learner, ts.env_id, ts.author, ts.source_sha256, ts.hint, ts.n_seeds, ts.p_cold, ts.p_hint,
               ts.rank, ts.lift_lower, ts.lift_upper, ts.p_learnable, o.observed_p_cold, o.observed_p_hint, o.observed_n_seeds,
               coalesce(e.env_valid, FALSE) AS env_valid, e.env_author, e.env_source_sha256, e.env_hint
        FROM ts LEFT JOIN observed o USING (env_id) LEFT JOIN env e USING (env_id)
        ORDER BY ts.rank, ts.env_id""", [learner, learner])
    df["hint_matches"] = (df["hint"].fillna("\0") == df["env_hint"].fillna("\1"))
    df["interval_width"] = df["lift_upper"].astype(float) - df["lift_lower"].astype(float)
    interval_rules = [
        Rule("rows_meet_learner_filter", "ExpectColumnValuesToNotBeNull", {"column": c}, f"{c} is set")
        for c in ("lift_lower", "lift_upper")] + [
        Rule("rows_meet_learner_filter", "ExpectColumnValuesToBeBetween",
             {"column": c, "min_value": -1, "max_value": 1}, f"{c} is in [-1, 1]") for c in ("lift_lower", "lift_upper")
    ] + [Rule("rows_meet_learner_filter", "ExpectColumnValuesToBeBetween",
              {"column": "interval_width", "min_value": 1e-6}, "lift_lower < lift_upper (a real, ordered interval)"),
         Rule("rows_meet_learner_filter", "ExpectColumnValuesToBeBetween",
              {"column": "lift_interval_error", "max_value": 1e-6},
              "recorded lift interval equals the one recomputed from the episodes (fitted prior's central 95% "
              "posterior interval united with the uniform prior's)")]
    recomputed = recomputed_admission(conn, episodes, envs, df, learner, min_hint, cold_ceiling)
    df["lift_interval_error"] = np.fmax((df["lift_lower"].astype(float) - recomputed["lift_lower"]).abs(),
                                        (df["lift_upper"].astype(float) - recomputed["lift_upper"]).abs()).fillna(1.0)
    if method == "probability":
        df["recomputed_p_learnable"] = recomputed["p_learnable"]
        df["p_learnable_error"] = (df["p_learnable"].astype(float) - df["recomputed_p_learnable"]).abs()
        filter_rules = [
            Rule("rows_meet_learner_filter", "ExpectColumnValuesToBeBetween",
                 {"column": "p_learnable", "min_value": threshold - TOLERANCE, "max_value": 1 + TOLERANCE},
                 f"recorded p_learnable >= training_admission_threshold ({threshold:g})"),
            Rule("rows_meet_learner_filter", "ExpectColumnValuesToBeBetween",
                 {"column": "recomputed_p_learnable", "min_value": threshold - 1e-6},
                 f"P(learnable) recomputed from the episodes >= training_admission_threshold ({threshold:g})"),
            Rule("rows_meet_learner_filter", "ExpectColumnValuesToBeBetween",
                 {"column": "p_learnable_error", "max_value": 1e-6},
                 "recorded p_learnable equals the one recomputed from the episodes"),
        ]
    else:
        filter_rules = [
            Rule("rows_meet_learner_filter", "ExpectColumnValuesToBeBetween",
                 {"column": "p_cold", "min_value": 0, "max_value": max_cold},
                 f"recorded p_cold <= training_max_cold ({max_cold:g})"),
            Rule("rows_meet_learner_filter", "ExpectColumnValuesToBeBetween",
                 {"column": "p_hint", "min_value": min_hint, "max_value": 1},
                 f"recorded p_hint >= training_min_hint ({min_hint:g})"),
            Rule("rows_meet_learner_filter", "ExpectColumnValuesToBeBetween",
                 {"column": "observed_p_cold", "max_value": max_cold + TOLERANCE},
                 f"p_cold recomputed from episodes <= training_max_cold ({max_cold:g})"),
            Rule("rows_meet_learner_filter", "ExpectColumnValuesToBeBetween",
                 {"column": "observed_p_hint", "min_value": min_hint - TOLERANCE},
                 f"p_hint recomputed from episodes >= training_min_hint ({min_hint:g})"),
        ]
    rules = [
        Rule("rows_meet_learner_filter", "ExpectColumnValuesToNotBeNull", {"column": "observed_p_cold"},
             "the learner has completed, matched episodes on the environment"),
        *filter_rules, *interval_rules,
        Rule("no_duplicate_environments", "ExpectColumnValuesToNotBeNull", {"column": "env_id"}, "env_id is set"),
        Rule("no_duplicate_environments", "ExpectColumnValuesToBeUnique", {"column": "env_id"},
             "each environment appears once in the learner's set"),
        Rule("no_duplicate_environments", "ExpectColumnValuesToBeInSet", {"column": "learner", "value_set": [learner]},
             f"rows belong to learner partition {learner!r}"),
        Rule("provenance_matches_environments", "ExpectColumnValuesToBeInSet",
             {"column": "env_valid", "value_set": [True]}, "the environment exists in `environments` and is valid"),
        Rule("provenance_matches_environments", "ExpectColumnPairValuesToBeEqual",
             {"column_A": "author", "column_B": "env_author"}, "author matches `environments`"),
        Rule("provenance_matches_environments", "ExpectColumnPairValuesToBeEqual",
             {"column_A": "source_sha256", "column_B": "env_source_sha256"}, "source_sha256 matches `environments`"),
        Rule("provenance_matches_environments", "ExpectColumnValuesToBeInSet",
             {"column": "hint_matches", "value_set": [True]}, "hint matches `environments`"),
    ]
    if include_self:
        rules.append(Rule("no_self_authored_environments", "ExpectColumnValuesToNotBeNull", {"column": "author"},
                          "author is set (self-authored environments allowed by training_include_self_authored)"))
    else:
        rules.append(Rule("no_self_authored_environments", "ExpectColumnValuesToNotBeInSet",
                          {"column": "author", "value_set": [learner]},
                          f"no environment authored by the learner {learner!r}"))
    df = df.drop(columns=["hint", "env_hint"])
    return [Frame("training_set", df, rules, index=["env_id"])]


def validate_frames(frames, learner: str) -> list[dg.AssetCheckResult]:
    if isinstance(frames, MissingTable):
        return failed_results(ASSET, NAMES, str(frames), partition=learner)
    return run_suite(ASSET, NAMES, "training_set_suite", frames, partition=learner)


def evaluate_training_set(conn, learner: str, rule: "TrainingRule | None" = None) -> list[dg.AssetCheckResult]:
    """Validate one learner's training set against the episodes and environments tables (``rule``: the one it was
    built with; by default the observed-rate rule, ``TrainingRule(method="rule")``)."""
    if rule is None:
        from envduels_dagster.core.training.training_set import TrainingRule

        rule = TrainingRule(method="rule")
    return validate_frames(load_or_error(load_frames, conn, learner, rule), learner)


@dg.multi_asset_check(
    specs=[spec(n, ASSET, d, blocking=True, partitions_def=PARTITIONS) for n, d in CHECKS.items()],
    name="training_set_checks", compute_kind="great_expectations",
    description="BLOCKING great-expectations suite over the learner's rows of table `training_set`.",
)
def training_set_checks(context: dg.AssetCheckExecutionContext, warehouse: DuckDBResource, settings: DuelSettings,
                        envduels_published: dg.ResourceParam[PublishedTableIOManager]):
    learner = partition_keys(context)["key"]
    with warehouse.get_connection() as conn:  # read, then release the file before validating
        frames = load_or_error(load_frames, conn, learner, settings.training_rule())
    # write-audit-publish: the set's staged snapshot becomes the published one only if all of these passed
    yield from publish_if_passed(context, envduels_published, ASSET, validate_frames(frames, learner), NAMES, learner)


@dg.multi_asset_check(
    specs=[spec("files_match_hashes", EXPORT, "Every file of the latest export matches SHA256SUMS and the contract.",
                blocking=True, partitions_def=training_export.partitions_def),
           spec("matches_training_set", EXPORT, "The export lists exactly the learner's training_set environments, "
                "each with its source hash.", blocking=True, partitions_def=training_export.partitions_def)],
    name="training_export_checks",
    description="BLOCKING integrity checks of the published export under $ENVDUELS_HOME/exports/<learner>/latest.",
)
def training_export_checks(context: dg.AssetCheckExecutionContext, warehouse: DuckDBResource):
    from envduels_dagster.api import exports_root
    from envduels_dagster.core.storage.warehouse import read_table
    from envduels_dagster.core.training.export import ExportIntegrityError, audit_against, verify_export

    learner = partition_keys(context)["key"]
    root = exports_root() / learner / "latest"
    try:
        manifest = verify_export(root.resolve())
    except (ExportIntegrityError, OSError, ValueError) as exc:
        message = f"{root}: {exc}"
        for name in ("files_match_hashes", "matches_training_set"):
            yield dg.AssetCheckResult(asset_key=EXPORT, check_name=name, passed=False,
                                      metadata={"error": dg.MetadataValue.text(message[:1000])})
        return
    yield dg.AssetCheckResult(asset_key=EXPORT, check_name="files_match_hashes", passed=True,
                              metadata={"path": dg.MetadataValue.path(str(root.resolve())),
                                        "environments": len(manifest.environments)})
    with warehouse.get_connection() as conn:
        rows = read_table(conn, "training_set", {"learner": learner})
    problems = audit_against(manifest, dict(zip(rows["env_id"], rows["source_sha256"])))
    yield dg.AssetCheckResult(asset_key=EXPORT, check_name="matches_training_set", passed=not problems,
                              metadata={"problems": dg.MetadataValue.text("; ".join(problems) or "none"),
                                        "environments": len(manifest.environments)})
