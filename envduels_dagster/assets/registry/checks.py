"""Checks on ``model_registry`` (table ``model_registry``) against the registry file it mirrors."""

import re

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
from envduels_dagster.assets.checking.secret_scan import find_secret_in, redact
from envduels_dagster.resources import GatewayResource

ASSET = dg.AssetKey(["model_registry"])
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"

CHECKS = {
    "matches_registry_file": "Every model of the registry file has exactly one row, with the same model string and "
                             "version; no row for a model the file does not list.",
    "holds_no_secrets": "api_key_env holds a variable NAME, never a key; no secret-looking strings or credentials "
                        "in URLs; prices are non-negative.",
}
NAMES = list(CHECKS)
TEXT_COLUMNS = ["name", "model", "api_base", "api_key_env", "version", "pool", "provider"]


def _redact_non_name(value):
    if not isinstance(value, str) or re.match(ENV_NAME, value):
        return value
    return f"<not a variable name: {redact(value)}>"


def load_frames(conn, file_models: list[dict]) -> list[Frame]:
    import pandas as pd

    cat = Catalog(conn)
    table = cat.table("model_registry")
    if table is None:
        raise MissingTable(missing_table_message("model_registry", "model_registry"))
    rows = query(conn, f"SELECT * FROM {table}")
    present = [c for c in TEXT_COLUMNS if c in rows.columns]
    rows["secret_found"] = [find_secret_in(vals) for vals in rows[present].itertuples(index=False)]
    if "api_key_env" in rows.columns:  # validated redacted: a key pasted here must not reach the UI
        rows["api_key_env"] = rows["api_key_env"].map(_redact_non_name)
    file_df = pd.DataFrame(file_models, columns=["name", "model", "version"]).rename(
        columns={"model": "file_model", "version": "file_version"})
    file_df["in_file"] = True
    rows["in_table"] = True
    df = rows.merge(file_df, on="name", how="outer")
    df["in_file"] = df["in_file"].astype("boolean").fillna(False).astype(bool)
    df["in_table"] = df["in_table"].astype("boolean").fillna(False).astype(bool)
    in_both = (("in_file", "==", True), ("in_table", "==", True))
    rules = [
        Rule("matches_registry_file", "ExpectColumnValuesToBeInSet", {"column": "in_table", "value_set": [True]},
             "every model of the registry file has a row"),
        Rule("matches_registry_file", "ExpectColumnValuesToBeInSet", {"column": "in_file", "value_set": [True]},
             "every row is a model of the registry file"),
        Rule("matches_registry_file", "ExpectColumnValuesToBeUnique", {"column": "name"}, "model names are unique"),
        Rule("matches_registry_file", "ExpectColumnPairValuesToBeEqual",
             {"column_A": "model", "column_B": "file_model"}, "model string matches the registry file", where=in_both),
        Rule("matches_registry_file", "ExpectColumnPairValuesToBeEqual",
             {"column_A": "version", "column_B": "file_version"}, "version matches the registry file",
             where=in_both),
        Rule("holds_no_secrets", "ExpectColumnValuesToMatchRegex", {"column": "api_key_env", "regex": ENV_NAME},
             "api_key_env is an environment variable name, not a key", requires=("api_key_env",)),
        Rule("holds_no_secrets", "ExpectColumnValuesToBeNull", {"column": "secret_found"},
             "no secret-looking strings in any text column"),
        *[Rule("holds_no_secrets", "ExpectColumnValuesToBeBetween", {"column": c, "min_value": 0},
               f"{c} is non-negative", requires=(c,)) for c in ("input_cost_per_mtok", "output_cost_per_mtok")],
    ]
    return [Frame("model_registry", df, rules, index=["name"])]


def validate_frames(frames) -> list[dg.AssetCheckResult]:
    if isinstance(frames, MissingTable):
        return failed_results(ASSET, NAMES, str(frames))
    return run_suite(ASSET, NAMES, "model_registry_suite", frames)


def evaluate_model_registry(conn, file_models: list[dict]) -> list[dg.AssetCheckResult]:
    """Validate table model_registry against ``file_models`` (dicts with name, model, version)."""
    return validate_frames(load_or_error(load_frames, conn, file_models))


@dg.multi_asset_check(
    specs=[spec(n, ASSET, d) for n, d in CHECKS.items()],
    name="model_registry_checks", compute_kind="great_expectations",
    description="great-expectations suite over table `model_registry`, compared with the registry file.",
)
def model_registry_checks(gateway: GatewayResource, warehouse: DuckDBResource):
    try:
        registry = gateway.registry()
    except ValueError as exc:  # RegistryError names file, entry and field
        yield from failed_results(ASSET, NAMES, f"the registry file does not load: {exc}")
        return
    file_models = [{"name": m.name, "model": m.model, "version": m.version} for m in registry.models]
    with warehouse.get_connection() as conn:  # read, then release the file before validating
        frames = load_or_error(load_frames, conn, file_models)
    yield from validate_frames(frames)
