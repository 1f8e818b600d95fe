"""``author_value`` [learner]: which author to pay to write this learner's next environments.

Why an asset per learner: the answer depends on the learner (what it fails cold and passes
hinted), so it is partitioned like ``training_set``; like it, it has no automation condition:
envduels_requests refreshes it in a request's "learners" stage (``learner_job``). Wiring only: read the warehouse, one
core call (``core.value.author_value``), write ``author_value`` and ``author_value_mix``, render.
"""

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.authoring.assets import authored_environments
from envduels_dagster.assets.duels.assets import duel_episodes
from envduels_dagster.assets.registry.partitions import by_solver, solver_partitions
from envduels_dagster.assets.shared import (
    OWNERS,
    display_table,
    documented_schema,
    rounded_metadata,
    table_metadata,
    table_version,
)
from envduels_dagster.core.storage.column_docs import describe
from envduels_dagster.resources import AuthorValueSettings, DuelSettings

TABLE_COLUMNS = [("author", "string"), ("status", "string"), ("rank", "int"), ("rank_lower", "int"),
                 ("rank_upper", "int"), ("n_envs", "int"), ("validity_rate", "float"), ("per_env", "float"),
                 ("per_env_lower", "float"), ("per_env_upper", "float"), ("per_usd", "float"),
                 ("per_usd_lower", "float"), ("per_usd_upper", "float"), ("per_kcall", "float"),
                 ("per_kcall_lower", "float"), ("per_kcall_upper", "float"), ("author_cost_usd", "float"),
                 ("author_calls", "int"), ("eval_calls", "int"), ("price_note", "string")]


MIX_COLUMNS = [("author", "string"), ("currency", "string"), ("budget", "float"), ("share", "float"),
               ("envs_to_write", "float"), ("expected_learnable", "float"), ("expected_lower", "float"),
               ("expected_upper", "float")]


CHART_COLUMNS = [("author", "string"), ("rank", "string"), ("n_envs", "int"), ("per_env", "string"),
                 ("per_usd", "string"), ("per_kcall", "string")]


def chart_table(table) -> dg.TableMetadataValue:
    """The author-value chart inline on the asset's page: a metadata table of text bars (``core.value.chart.value_bars``).

    Why a table: the Dagster UI (1.13) draws a ``MetadataValue.table`` in place, but Markdown of 1000 characters or
    more, such as the SVG chart as a data-URI image, only behind "[Show Markdown]"."""
    from envduels_dagster.core.value.chart import BAR_LEGEND, value_bars

    docs = {"rank": "Rank with its 95% interval among the ranked authors, else why the author is not ranked.",
            **{col: f"{describe('author_value', col)} {BAR_LEGEND}" for col in ("per_env", "per_usd", "per_kcall")}}
    return display_table(value_bars(table), CHART_COLUMNS, "author_value", descriptions=docs)


def author_value_table(table) -> dg.TableMetadataValue:
    """The learner's rows, the answer first: ranked authors by rank, then the unranked ones (no price, self,
    insufficient data) by author; every column described, floats rounded for display."""
    rows = table.sort_values(["rank", "author"], na_position="last").to_dict("records")
    return display_table(rows, TABLE_COLUMNS, "author_value")


@dg.asset(
    partitions_def=solver_partitions,
    deps=[dg.AssetDep(duel_episodes, partition_mapping=by_solver),
          dg.AssetDep(authored_environments, partition_mapping=dg.AllPartitionMapping())],
    group_name="training", kinds={"python", "duckdb"}, owners=OWNERS, tags={"layer": "product"}, code_version="4",
    # The asset writes two tables: author_value's columns are its schema, author_value_mix's stand beside them.
    metadata={"dagster/column_schema": documented_schema("author_value"),
              "author_value_mix columns": dg.MetadataValue.table_schema(documented_schema("author_value_mix"))},
    description="For one learner (partition): per author, expected learnable environments per environment "
                "written, per dollar and per 1000 authoring calls, with 95% intervals, validity rate and a rank "
                "with its uncertainty; the best author mix for AuthorValueSettings' budget. "
                "Tables `author_value`, `author_value_mix`.",
)
def author_value(context: dg.AssetExecutionContext, value_settings: AuthorValueSettings, settings: DuelSettings,
                 warehouse: DuckDBResource) -> dg.MaterializeResult:
    from envduels_dagster.core.storage.warehouse import read_table, replace_rows
    from envduels_dagster.core.value.author_value import ValueConfig
    from envduels_dagster.core.value.author_value import author_value as compute_author_value
    from envduels_dagster.core.value.chart import answer_markdown, svg_data_uri, value_sentence, value_svg

    learner = context.partition_key
    with warehouse.get_connection() as conn:
        envs = read_table(conn, "environments")
        read_table(conn, "episodes", {"solver": learner})  # (ensures the schema)
        # every learner's rows fit the prior of the rates behind P(learnable), as in training_set (one definition)
        episodes = conn.execute("SELECT env_id, author, solver, round, condition, seed, status, model_calls, cost_usd "
                                "FROM episodes").df()
    s = value_settings
    config = ValueConfig(projection_budget_usd=s.projection_budget_usd,
                         projection_budget_calls=s.projection_budget_calls, max_share=s.max_share,
                         min_envs=s.min_envs, n_boot=s.n_boot)
    table, mix = compute_author_value(envs, episodes, learner, config, cold_ceiling=settings.training_cold_ceiling,
                                      min_hint=settings.training_min_hint)
    with warehouse.get_connection() as conn:
        replace_rows(conn, "author_value", table, {"learner": learner})
        replace_rows(conn, "author_value_mix", mix, {"learner": learner})
    svg = value_svg(table, learner)
    chart = _chart_path(learner)
    chart.write_text(svg)
    answer = value_sentence(table, mix, learner, min_envs=s.min_envs)
    context.log.info(answer)
    versioned = table_version(warehouse, "author_value", "author_value_mix", where={"learner": learner})
    return dg.MaterializeResult(data_version=versioned, metadata=rounded_metadata({  # the answer first, details after
        "answer": dg.MetadataValue.md(answer_markdown(answer)),
        "chart": chart_table(table),  # drawn in place by the UI
        "chart_image": dg.MetadataValue.md(f"![author value for {learner}]({svg_data_uri(svg)})"),
        "author_value": author_value_table(table),
        "num_rows": len(table),
        "chart_file": dg.MetadataValue.path(str(chart)),
        "rank_basis": str(table["rank_basis"].iloc[0]) if len(table) else "none",
        "projection": display_table(mix.to_dict("records"), MIX_COLUMNS, "author_value_mix"),
        "budget": dg.MetadataValue.json({"usd": s.projection_budget_usd, "calls": s.projection_budget_calls, "max_share": s.max_share}),
        **table_metadata(warehouse, "author_value", {"learner": learner}),  # the column descriptions last
    }))


def _chart_path(learner: str):
    from envduels_dagster.settings.locations import envduels_home

    folder = envduels_home() / "reports" / "author_value"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{learner}.svg"
