"""One author partition's environments written and reported the same way, authored or imported."""

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.shared import markdown_table, table_metadata, table_version


def write_environments(warehouse: DuckDBResource, df, author: str, version: str, **extra) -> dg.MaterializeResult:
    """Replace the round-0 rows of ``author`` with ``df``; the result carries the partition's table metadata,
    data version, validity figures and rejections, plus ``extra`` (model calls, an import's verdicts ...)."""
    from envduels_dagster.core.storage.warehouse import replace_rows

    partition = {"author": author, "round": 0}
    with warehouse.get_connection() as conn:
        replace_rows(conn, "environments", df, partition)
    valid = int(df["valid"].sum())
    return dg.MaterializeResult(data_version=table_version(warehouse, "environments", where=partition), metadata={
        **table_metadata(warehouse, "environments", partition),
        "num_rows": len(df),
        "valid": valid,
        "validity_rate": valid / len(df) if len(df) else 0.0,
        "domains": ", ".join(sorted(df[df["valid"]]["domain"].unique())),
        "rejections": dg.MetadataValue.md(markdown_table(df[~df["valid"]][["env_id", "reject_reason"]])),
        "author_version": version,
        **extra,
    })
