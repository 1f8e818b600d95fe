"""``rankings`` and ``design_convergence``: the Python analyses over the dbt marts (DESIGN §6).

Why Python assets next to dbt: Bradley-Terry fits, bootstraps and AST similarity are what SQL does
badly. The statistics live in ``core/rankings/leaderboard.py`` and ``core/rankings/convergence.py``, the UI text in
``core/rankings/reporting.py``; these assets read the marts, call one core function, write one table named
after the asset (plus a companion table for the figures that are not per model), and put the
leaderboard, the author x solver lift grid and the transitivity / role-separation figures in the
materialization metadata.

Rounds: the marts are per round (never pooled). ``rankings`` reads one round, ``DuelSettings.rankings_round``
(default 0, the benchmark), and names it in its tables (column ``round``) and metadata. ``design_convergence``
compares designs of one round too (the same setting): a kept copy in a later round is byte-identical to its
parent and would otherwise count as a perfect cross-round "convergence" with itself.
"""

import math
import warnings
from typing import Any

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.shared import OWNERS, display_table, documented_schema, table_metadata, table_version
from envduels_dagster.core.models.capabilities import skill_ranks
from envduels_dagster.core.rankings.reporting import finite_or_none, lift_grid, markdown_table, transitivity_markdown
from envduels_dagster.resources import DuelSettings
from envduels_dagster.resources.io_managers import PUBLISHED_IO_MANAGER_KEY

MARTS = [dg.AssetKey(name) for name in ("env_solver_stats", "pair_lift", "duels", "solver_scores", "author_scores")]


class RankingsConfig(dg.Config):
    n_boot: int = 1000  # cluster-bootstrap replicates (environments resampled within author; duels re-decided)
    seed: int = 0
    bt_prior: float = 0.5  # virtual tied games per pair in the Bradley-Terry fit
    n_perm: int = 10000  # permutations for the role-separation p-value (exact up to 8 models)
    lift_grid_method: str = "holm"  # multiple-comparison control of the lift grid's "lift > 0": "holm" or "bh"


class ConvergenceConfig(dg.Config):
    ngram: int = 4
    n_perm: int = 1000
    cluster_threshold: float = 0.9
    seed: int = 0


LEADERBOARD_COLUMNS = [
    ("model", "string"), ("solver_rank", "float"), ("solver_rank_lower", "float"), ("solver_rank_upper", "float"),
    ("solver_score", "float"), ("solver_score_ci_lower", "float"), ("solver_score_ci_upper", "float"),
    ("solver_n_envs", "int"), ("author_rank", "float"), ("author_rank_lower", "float"),
    ("author_rank_upper", "float"), ("author_score", "float"), ("author_score_ci_lower", "float"),
    ("author_score_ci_upper", "float"), ("author_n_envs", "int"), ("design_score_corrected", "float"),
    ("bt_strength", "float"), ("bt_strength_lower", "float"), ("bt_strength_upper", "float"),
    ("bt_strength_population_lower", "float"), ("bt_strength_population_upper", "float"), ("duel_record", "string")]


def leaderboard_table(table) -> dg.TableMetadataValue:
    """The leaderboard as Chatbot Arena shows one: rank with its interval, score with its interval, and the
    sample size, on one sortable table; every column described (``core/storage/column_docs.py``), floats rounded for
    display. The calibrated intervals: the scores' t intervals (the bootstrap ones are NULL below 30 environments
    per author), and the population bounds of the Bradley-Terry strengths beside the bootstrap interval."""
    rows = [{**r, "duel_record": f"{r['duel_wins']}-{r['duel_ties']}-{r['duel_losses']}"}
            for r in table.to_dict("records")]
    return display_table(rows, LEADERBOARD_COLUMNS, "rankings",
                         descriptions={"duel_record": "Duels won-tied-lost (head to head over shared environments)."})


@dg.asset(
    deps=[*MARTS, "model_registry"], group_name="rankings", kinds={"python", "duckdb"}, owners=OWNERS,
    tags={"layer": "analysis"}, code_version="3", io_manager_key=PUBLISHED_IO_MANAGER_KEY,
    metadata={"dagster/column_schema": documented_schema("rankings"),  # and its companion table's columns
              "rankings_summary columns": dg.MetadataValue.table_schema(documented_schema("rankings_summary"))},
    description="Solver and author rankings with 95% intervals (cluster bootstrap over environments, seeds kept "
                "paired), Bradley-Terry strengths of the duels and the transitivity of the duel tournament (cyclic "
                "triads, Kendall's zeta) with intervals from the same environment replicates (every duel re-decided "
                "by the duels mart's Welch rule per replicate; withheld with a reason below the stated minimum) and "
                "bounds on the infinite-environment tournament (a simultaneous sign set over the duels, Bonferroni; "
                "`*_population_lower/upper`), and "
                "role separation (solver rank vs author rank, permutation p-value); the metadata's author x solver "
                "lift grid decides \"lift > 0\" per pair by a one-sided t test over environments under Holm's "
                "control (named in the metadata). Tables `rankings` (one row per model) and `rankings_summary` (one row). "
                "Rounds used: one, DuelSettings.rankings_round (default 0 = the benchmark, original authoring); "
                "the marts are per round and never pooled. Table `rankings` is published as a read-only snapshot "
                "$ENVDUELS_HOME/published/rankings/_all.parquet once its checks pass (`consumer.RANKINGS`).",
)
def rankings(config: RankingsConfig, warehouse: DuckDBResource, settings: DuelSettings):
    from envduels_dagster.core.rankings.leaderboard import RankingConfig, compute_rankings
    from envduels_dagster.core.stats.multiple import lift_grid_tests
    from envduels_dagster.core.storage.warehouse import replace_table

    round_ = settings.rankings_round
    with warehouse.get_connection() as conn:
        stats = conn.execute("SELECT * FROM env_solver_stats WHERE round = ?", [round_]).df()
        duels = conn.execute("SELECT * FROM duels WHERE round = ?", [round_]).df()
        pair = conn.execute("SELECT author, solver, lift, lift_ci_lower, lift_ci_upper, lift_ci_reason FROM pair_lift "
                            "WHERE round = ?", [round_]).df()
        registry = conn.execute("SELECT * FROM model_registry").df()
    if stats.empty:
        raise dg.Failure(f"env_solver_stats has no round-{round_} rows: materialize the round's episodes and the "
                         "dbt marts first (DuelSettings.rankings_round picks the round)")
    skill = skill_ranks(registry[["name", "model"]].itertuples(index=False))  # providers that state one
    ranking = RankingConfig(n_boot=config.n_boot, seed=config.seed, bt_prior=config.bt_prior, n_perm=config.n_perm)
    table, summary = compute_rankings(stats, duels, ranking, skill_rank=skill or None, round_=round_)
    with warehouse.get_connection() as conn:
        replace_table(conn, "rankings", table)
        replace_table(conn, "rankings_summary", summary)
    tests = lift_grid_tests(stats, method=config.lift_grid_method)
    peer = tests[~tests["is_self_pair"]]
    s = summary.iloc[0]
    transitivity = transitivity_markdown(s)
    scope = rankings_scope(registry, stats)
    metadata: dict[str, Any] = {
        **table_metadata(warehouse, "rankings"),
        # which figures mean something with these roles (core/requests/roster.py): read before the leaderboard
        "meaningful_rankings": dg.MetadataValue.md(
            "| figure | with these roles |\n|---|---|\n"
            + "\n".join(f"| {k.replace('_', ' ')} | {v} |" for k, v in scope.items())),
        **{f"scope_{k}": v.split(":")[0] for k, v in scope.items()},
        "rounds used": f"round {round_}" + (" (the benchmark: original authoring)" if round_ == 0 else
                                             f" (hardening round {round_})"),
        "round": round_,
        "num_rows": len(table),
        f"leaderboard (round {round_})": leaderboard_table(table),
        f"lift_grid (round {round_}; rows: author, columns: solver)": dg.MetadataValue.md(lift_grid(pair, tests)),
        "lift_grid_multiple_comparison": tests["method"].iloc[0] if len(tests) else config.lift_grid_method,
        "lift_grid_pairs_tested": int(peer["p_value"].notna().sum()),
        "lift_grid_pairs_decided": int(peer["decided"].sum()),
        "transitivity_and_role_separation": dg.MetadataValue.md(transitivity),
        "kendall_zeta": finite_or_none(s.kendall_zeta),
        "cyclic_triads": float(s.cyclic_triads),
        "role_rho": finite_or_none(s.role_rho),
        "role_p_value": finite_or_none(s.role_p_value),
        "n_boot": config.n_boot,
        "tournament_interval": (s.bt_interval_reason if isinstance(s.bt_interval_reason, str)
                                else s.tournament_interval_method),
        "population_bounds": (s.population_interval_reason if isinstance(s.population_interval_reason, str)
                              else s.population_decision_control),
    }
    if s.bt_separated is not None:
        metadata["bt_separated"] = bool(s.bt_separated)
    if skill and not math.isnan(s.skill_order_kendall_tau):
        metadata["skill_order_kendall_tau"] = float(s.skill_order_kendall_tau)
    # the table goes to the IO manager, which stages its snapshot; the result checks publish it (write-audit-publish)
    with warnings.catch_warnings():  # Output(data_version=...) is marked beta; it is the documented way
        warnings.simplefilter("ignore")
        return dg.Output(table, metadata=metadata,
                         data_version=table_version(warehouse, "rankings", "rankings_summary"))


def rankings_scope(registry, stats) -> dict[str, str]:
    """``core.requests.roster.ranking_scope`` of the ``model_registry`` table's roles and the imports found in the stats."""
    from envduels_dagster.core.requests.roster import ranking_scope, roster_from_table

    roles = registry["roles"] if "roles" in registry else [None] * len(registry)
    return ranking_scope(roster_from_table(zip(registry["name"], roles), stats["author"]))


@dg.asset(
    deps=["authored_environments"], group_name="rankings", kinds={"python", "duckdb"}, owners=OWNERS,
    tags={"layer": "analysis"}, code_version="1",
    metadata={"dagster/column_schema": documented_schema("design_convergence"),
              "design_convergence_clusters columns": dg.MetadataValue.table_schema(
                  documented_schema("design_convergence_clusters"))},
    description="How similar environment designs are across authors (cosine of AST-shape n-gram tf-idf) against a "
                "label-permutation null stratified by environment family (labels shuffled within family), per author "
                "pair and overall (table `design_convergence`), and the "
                "clusters of near-identical designs that span several authors (`design_convergence_clusters`). Rounds used: "
                "one, DuelSettings.rankings_round (default 0 = original authoring).",
)
def design_convergence(config: ConvergenceConfig, warehouse: DuckDBResource,
                       settings: DuelSettings) -> dg.MaterializeResult:
    import pandas as pd

    from envduels_dagster.core.rankings.convergence import design_convergence as compute
    from envduels_dagster.core.storage.warehouse import replace_table

    with warehouse.get_connection() as conn:
        envs = conn.execute("SELECT env_id, author, domain, family, source FROM environments "
                            "WHERE valid AND round = ?", [settings.rankings_round]).df()
    table, members = compute(envs, n=config.ngram, n_perm=config.n_perm, threshold=config.cluster_threshold,
                             seed=config.seed)
    with warehouse.get_connection() as conn:
        replace_table(conn, "design_convergence", table)
        replace_table(conn, "design_convergence_clusters", members)
    overall = table[table["scope"] == "overall"]
    spanning = members[members["n_authors"] > 1] if len(members) else members
    clusters = (spanning.groupby("cluster_id").agg(size=("env_id", "size"), authors=("authors", "first"),
                                                   families=("family", lambda f: ", ".join(sorted(set(map(str, f))))),
                                                   similarity=("mean_similarity", "first")).reset_index()
                if len(spanning) else pd.DataFrame())
    pairs = table[table["scope"] != "overall"][["author_a", "author_b", "similarity", "null_lower", "null_upper",
                                                 "p_value"]]
    metadata: dict[str, Any] = {
        **table_metadata(warehouse, "design_convergence"),
        "rounds used": f"round {settings.rankings_round}",
        "num_rows": len(table),
        "environments": len(envs),
        "null": str(table["null_strata"].iloc[0]) if len(table) else "no null (fewer than 2 environments)",
        "clusters_spanning_authors": int(spanning["cluster_id"].nunique()) if len(spanning) else 0,
        "clusters": dg.MetadataValue.md(markdown_table(clusters)),
        "author_pairs": dg.MetadataValue.md(markdown_table(pairs, floatfmt=".3f")),
    }
    if len(overall) and not math.isnan(overall["similarity"].iloc[0]):
        o = overall.iloc[0]
        metadata["cross_author_similarity"] = float(o.similarity)
        metadata["null_similarity"] = finite_or_none(o.null_mean)
        metadata["p_value"] = finite_or_none(o.p_value)
    return dg.MaterializeResult(metadata=metadata, data_version=table_version(
        warehouse, "design_convergence", "design_convergence_clusters"))
