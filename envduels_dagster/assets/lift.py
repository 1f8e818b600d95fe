"""``pair_lift``: mean matched-seed hint lift per (author, solver) with a 95% interval."""


import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.common import OWNERS, markdown_table
from envduels_dagster.assets.duels import duel_episodes
from envduels_dagster.core.stats import pair_lift as compute_pair_lift
from envduels_dagster.core.warehouse import read_table, replace_rows


@dg.asset(
    deps=[duel_episodes], group_name="marts", kinds={"python", "duckdb"}, owners=OWNERS, tags={"layer": "mart"},
    description="Per (author, solver): mean over the author's valid environments of hinted minus cold success on "
                "matched seeds, with a cluster-bootstrap 95% interval (lift_lower, lift_upper).",
)
def pair_lift(warehouse: DuckDBResource) -> dg.MaterializeResult:
    with warehouse.get_connection() as conn:
        episodes = read_table(conn, "episodes")
    df = compute_pair_lift(episodes)
    with warehouse.get_connection() as conn:
        replace_rows(conn, "pair_lift", df)
    grid = df.pivot(index="author", columns="solver", values="lift").reset_index() if len(df) else df
    return dg.MaterializeResult(metadata={
        "num_rows": len(df),
        "mean_peer_lift": float(df[~df["is_self_pair"]]["lift"].mean()) if len(df) else 0.0,
        "lift_grid (rows: author, columns: solver)": dg.MetadataValue.md(markdown_table(grid)),
    })
