"""``model_registry``: the validated registry as a warehouse table.

Why an asset: every other area depends on it, so the UI shows which registry (file and
versions) a run used, and its checks catch a key pasted into the file before it spreads.
"""

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.shared import OWNERS, documented_schema, markdown_table, table_metadata, table_version
from envduels_dagster.resources import GatewayResource


@dg.asset(
    group_name="registry", kinds={"python", "duckdb"}, owners=OWNERS, tags={"layer": "source"}, code_version="1",
    metadata={"dagster/column_schema": documented_schema("model_registry")},
    description="Models in the registry file (ENVDUELS_REGISTRY): name, litellm model string, version, "
                "provider pool and prices. Never holds keys, only the names of their variables.",
)
def model_registry(gateway: GatewayResource, warehouse: DuckDBResource) -> dg.MaterializeResult:
    import pandas as pd

    from envduels_dagster.core.models.registry import dump_entry
    from envduels_dagster.core.storage.warehouse import replace_rows

    registry = gateway.registry()
    df = pd.DataFrame([dump_entry(m) for m in registry.models])
    with warehouse.get_connection() as conn:
        replace_rows(conn, "model_registry", df)
    return dg.MaterializeResult(data_version=table_version(warehouse, "model_registry"), metadata={
        **table_metadata(warehouse, "model_registry"),
        "num_rows": len(df),
        "registry_path": dg.MetadataValue.path(registry.path),
        "models": dg.MetadataValue.md(markdown_table(df[["name", "model", "version", "provider"]])),
    })
