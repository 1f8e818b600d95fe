"""``rankings`` and ``design_convergence``: the Python analyses over the dbt marts (DESIGN §6).

The statistics live in ``core/rankings.py`` and ``core/convergence.py`` (no Dagster there); these assets
read the marts from the warehouse, write one table named after the asset (plus a companion table for the
figures that are not per model), and put the leaderboard, the author x solver lift grid and the
transitivity / role-separation figures in the materialization metadata.
"""

import math

import dagster as dg
import pandas as pd
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.authoring import authored_environments
from envduels_dagster.assets.common import AFTER_PAIRS, OWNERS, markdown_table
from envduels_dagster.assets.registry import model_registry
from envduels_dagster.core.warehouse import replace_table

MARTS = [dg.AssetKey(name) for name in ("env_solver_stats", "pair_lift", "duels", "solver_scores", "author_scores")]
SIM_PREFIX = "envduels-sim/"


class RankingsConfig(dg.Config):
    n_boot: int = 1000  # cluster-bootstrap replicates (environments resampled within author)
    seed: int = 0
    bt_prior: float = 0.5  # virtual tied games per pair in the Bradley-Terry fit
    n_perm: int = 10000  # permutations for the role-separation p-value (exact up to 8 models)


class ConvergenceConfig(dg.Config):
    ngram: int = 4
    n_perm: int = 1000
    cluster_threshold: float = 0.9
    seed: int = 0


def sim_skill_ranks(registry: pd.DataFrame) -> dict[str, int]:
    """Documented skill rank of each registry model served by a simulated profile (empty for real models)."""
    from envduels_dagster.sim.profiles import PROFILES

    out = {}
    for name, model in registry[["name", "model"]].itertuples(index=False):
        profile = str(model).removeprefix(SIM_PREFIX) if str(model).startswith(SIM_PREFIX) else None
        if profile in PROFILES:
            out[name] = PROFILES[profile].skill_rank
    return out


def _fmt(x: float, digits: int = 2) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def lift_grid(pair: pd.DataFrame) -> str:
    """Author x solver Markdown grid: lift [lower, upper]; self pairs in italics (excluded from peer metrics)."""
    if pair.empty:
        return "_no pairs_"
    authors = sorted(pair["author"].unique())
    solvers = sorted(pair["solver"].unique())
    cells = {(r.author, r.solver): r for r in pair.itertuples(index=False)}
    lines = ["| author \\ solver | " + " | ".join(solvers) + " |", "|---|" + "---|" * len(solvers)]
    for a in authors:
        row = []
        for s in solvers:
            r = cells.get((a, s))
            if r is None:
                row.append("")
                continue
            text = f"{r.lift:+.2f} [{r.lift_lower:+.2f}, {r.lift_upper:+.2f}]"
            row.append(f"_{text}_" if a == s else (f"**{text}**" if r.lift_lower > 0 else text))
        lines.append(f"| **{a}** | " + " | ".join(row) + " |")
    lines.append("")
    lines.append("Bold: interval above zero. Italic: self pair (not a peer result).")
    return "\n".join(lines)


def leaderboard_table(table: pd.DataFrame) -> dg.TableMetadataValue:
    cols = [("model", "string"), ("solver_rank", "float"), ("solver_score", "float"), ("solver_score_lower", "float"),
            ("solver_score_upper", "float"), ("author_rank", "float"), ("author_score", "float"),
            ("author_score_lower", "float"), ("author_score_upper", "float"), ("design_score", "float"),
            ("bt_strength", "float"), ("bt_strength_lower", "float"), ("bt_strength_upper", "float"),
            ("duel_record", "string")]
    records = []
    for r in table.to_dict("records"):
        row = {c: (None if isinstance(r.get(c), float) and math.isnan(r[c]) else r.get(c)) for c, _ in cols[:-1]}
        for c, kind in cols[:-1]:
            if kind == "float" and row[c] is not None:
                row[c] = round(float(row[c]), 3)
        row["duel_record"] = f"{r['duel_wins']}-{r['duel_ties']}-{r['duel_losses']}"
        records.append(dg.TableRecord(row))
    schema = dg.TableSchema(columns=[dg.TableColumn(c, kind) for c, kind in cols])
    return dg.MetadataValue.table(records, schema)


@dg.asset(
    deps=[*MARTS, model_registry], group_name="rankings", kinds={"python", "duckdb"}, owners=OWNERS,
    tags={"layer": "analysis"}, automation_condition=AFTER_PAIRS,
    description="Solver and author rankings with 95% intervals (cluster bootstrap over environments, seeds kept "
                "paired), Bradley-Terry strengths of the duels with bootstrap intervals, transitivity of the duel "
                "tournament (cyclic triads, Kendall's zeta) and role separation (solver rank vs author rank, "
                "permutation p-value). Tables `rankings` (one row per model) and `rankings_summary` (one row).",
)
def rankings(config: RankingsConfig, warehouse: DuckDBResource) -> dg.MaterializeResult:
    from envduels_dagster.core.rankings import compute_rankings

    with warehouse.get_connection() as conn:
        stats = conn.execute("SELECT * FROM env_solver_stats").df()
        duels = conn.execute("SELECT * FROM duels").df()
        pair = conn.execute("SELECT author, solver, lift, lift_lower, lift_upper FROM pair_lift").df()
        registry = conn.execute("SELECT name, model FROM model_registry").df()
    if stats.empty:
        raise dg.Failure("env_solver_stats is empty: materialize duel_episodes and the dbt marts first")
    skill = sim_skill_ranks(registry)
    table, summary = compute_rankings(stats, duels, n_boot=config.n_boot, seed=config.seed,
                                      bt_prior=config.bt_prior, n_perm=config.n_perm, skill_rank=skill or None)
    with warehouse.get_connection() as conn:
        replace_table(conn, "rankings", table)
        replace_table(conn, "rankings_summary", summary)
    s = summary.iloc[0]
    transitivity = (
        f"**Transitivity of the duel tournament** ({int(s.n_duels)} duels, {int(s.n_decisive_duels)} decisive; "
        f"a tie counts half a win to each side)\n\n"
        f"* cyclic triads c = {_fmt(s.cyclic_triads)} of at most {_fmt(s.cyclic_triads_max)}\n"
        f"* Kendall's zeta = 1 - c/c_max = {_fmt(s.kendall_zeta)} (1 = perfectly transitive)\n\n"
        f"**Role separation** (solver rank vs author rank, {int(s.role_n_models)} models)\n\n"
        f"* Spearman rho = {_fmt(s.role_rho)} [95% {_fmt(s.role_rho_lower)}, {_fmt(s.role_rho_upper)}], "
        f"permutation p = {_fmt(s.role_p_value, 3)} ({int(s.role_n_permutations)} permutations)\n"
    )
    metadata = {
        "num_rows": len(table),
        "leaderboard": leaderboard_table(table),
        "lift_grid (rows: author, columns: solver)": dg.MetadataValue.md(lift_grid(pair)),
        "transitivity_and_role_separation": dg.MetadataValue.md(transitivity),
        "kendall_zeta": float(s.kendall_zeta) if not math.isnan(s.kendall_zeta) else None,
        "cyclic_triads": float(s.cyclic_triads),
        "role_rho": float(s.role_rho) if not math.isnan(s.role_rho) else None,
        "role_p_value": float(s.role_p_value) if not math.isnan(s.role_p_value) else None,
        "n_boot": config.n_boot,
    }
    if skill and not math.isnan(s.skill_order_kendall_tau):
        metadata["skill_order_kendall_tau"] = float(s.skill_order_kendall_tau)
    return dg.MaterializeResult(metadata=metadata)


@dg.asset(
    deps=[authored_environments], group_name="rankings", kinds={"python", "duckdb"}, owners=OWNERS,
    tags={"layer": "analysis"}, automation_condition=AFTER_PAIRS,
    description="How similar environment designs are across authors (cosine of AST-shape n-gram tf-idf) against a "
                "label-permutation null, per author pair and overall (table `design_convergence`), and the "
                "clusters of near-identical designs that span several authors (`design_convergence_clusters`).",
)
def design_convergence(config: ConvergenceConfig, warehouse: DuckDBResource) -> dg.MaterializeResult:
    from envduels_dagster.core.convergence import design_convergence as compute

    with warehouse.get_connection() as conn:
        envs = conn.execute("SELECT env_id, author, domain, family, source FROM environments WHERE valid").df()
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
    metadata = {
        "num_rows": len(table),
        "environments": len(envs),
        "clusters_spanning_authors": int(spanning["cluster_id"].nunique()) if len(spanning) else 0,
        "clusters": dg.MetadataValue.md(markdown_table(clusters)),
        "author_pairs": dg.MetadataValue.md(markdown_table(pairs, floatfmt=".3f")),
    }
    if len(overall) and not math.isnan(overall["similarity"].iloc[0]):
        o = overall.iloc[0]
        metadata["cross_author_similarity"] = float(o.similarity)
        metadata["null_similarity"] = float(o.null_mean) if not math.isnan(o.null_mean) else None
        metadata["p_value"] = float(o.p_value) if not math.isnan(o.p_value) else None
    return dg.MaterializeResult(metadata=metadata)
