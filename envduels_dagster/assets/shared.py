"""What every area shares: owners, the export's automation condition, UI helpers, table metadata.

Why here: one definition of "publish only what passed its blocking checks", one timestamp
convention (naive UTC) for warehouse rows, and one way every table asset reports Dagster's standard
table metadata (``dagster/row_count``, ``dagster/column_schema``, ``dagster/table_name``), read from
the warehouse table itself rather than from the frame the asset meant to write.
"""

import datetime as dt
from typing import Any

import dagster as dg

from envduels_dagster.core.rankings.reporting import markdown_table

__all__ = ["AFTER_CHECKED_TRAINING_SET", "OWNERS", "contract_schema", "display_table", "documented_schema", "markdown_table",
           "publish_if_passed", "round_for_display", "table_metadata", "table_version", "utcnow"]

OWNERS = ["team:envduels"]

# The export follows a training set materialized outside a request (by hand in the UI) only once the set's
# BLOCKING checks passed, and only when its content changed: eager() alone waits for materializations, not
# for checks (it would publish a set that failed them, NOTES-dagster), and fires on every materialization
# (it would re-export an unchanged set). The set's data version is a hash of its rows, so "changed" means
# new rows. The same condition is what a downstream code location uses (consumer.ON_NEW_PASSING_SET).
# Marts, rankings and training sets have no automation condition: envduels_requests refreshes them once
# per request, after every partition of it landed.
AFTER_CHECKED_TRAINING_SET = (
    dg.AutomationCondition.any_deps_match(dg.AutomationCondition.data_version_changed()).since(
        dg.AutomationCondition.newly_requested() | dg.AutomationCondition.newly_updated())
    & dg.AutomationCondition.all_deps_blocking_checks_passed()
    & ~dg.AutomationCondition.any_deps_missing()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
).with_label("new passing EnvDuels training set")


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


# The standard keys a table asset's materialization carries (tests/assets/test_table_metadata.py asserts them).
TABLE_METADATA_KEYS = ("dagster/row_count", "dagster/column_schema", "dagster/table_name")


def table_metadata(warehouse: Any, table: str, where: dict[str, object] | None = None,
                   descriptions: dict[str, str] | None = None) -> dict[str, Any]:
    """Dagster's standard table metadata of warehouse ``table``: row count (of the rows matching ``where``,
    e.g. the partition's), column schema (the table's DuckDB columns) and qualified table name.

    ``warehouse``: an open DuckDB connection, or a resource with ``get_connection()`` (a short connection
    of its own is opened then). Read after the write, so it reports what the table holds. Column descriptions:
    ``descriptions`` (a dbt model's, from its schema.yml), else ``core/storage/column_docs.py``."""
    from envduels_dagster.core.storage.column_docs import describe
    from envduels_dagster.core.storage.warehouse import describe_table

    if hasattr(warehouse, "get_connection"):
        with warehouse.get_connection() as conn:
            return table_metadata(conn, table, where, descriptions)
    name, columns, rows = describe_table(warehouse, table, where)
    schema = dg.TableSchema(columns=[
        dg.TableColumn(column, ctype, description=(descriptions or {}).get(column) or describe(table, column))
        for column, ctype in columns])
    return {"dagster/row_count": rows, "dagster/column_schema": schema, "dagster/table_name": name}


def documented_schema(table: str) -> dg.TableSchema:
    """The documented columns of ``table`` (``core/storage/column_docs.py``) as a schema for the asset's definition, so
    the catalog shows them before anything is materialized (the materialization's schema carries the DuckDB types)."""
    from envduels_dagster.core.storage.column_docs import DOCS

    return dg.TableSchema(columns=[dg.TableColumn(name, _column_type(name), description=text)
                                   for name, text in DOCS[table].items()])


# Types by name, not from core.storage.warehouse.SCHEMA: importing that module loads pandas, and building the
# definitions must not (tests/assets/test_code_location.py). tests/assets/test_column_schemas.py checks these
# against the warehouse schema.
_TEXT = {"learner", "env_id", "author", "domain", "class_name", "source_sha256", "hint", "status", "price_note",
         "rank_basis", "admission_method", "model", "run_id", "data_version", "name", "api_base", "api_key_env",
         "version", "pool", "provider", "client", "roles", "params", "family", "source", "winnability",
         "parent_env_id", "author_version", "author_meta", "prompt_version", "solver", "condition", "stop_reason",
         "retry_errors", "error", "transcript", "solver_version", "sampling", "finish_reasons", "currency", "scope",
         "author_a", "author_b", "null_strata"}
_BOOLEAN = {"is_self", "priced", "bt_separated", "simulated", "valid", "is_self_pair"}
_INTEGER = {"rank", "rank_lower", "rank_upper", "duel_wins", "duel_ties", "duel_losses", "round", "max_tokens",
            "max_concurrency", "max_in_flight", "turns", "format_errors", "model_calls", "cached_calls", "retries",
            "n_pairs", "n_train_envs", "n_heldout_envs", "n_env_pairs", "eval_calls", "author_calls"}
_BIGINT = {"max_reply_bytes", "author_tokens", "author_prompt_tokens", "author_completion_tokens", "prompt_tokens",
           "completion_tokens", "reasoning_tokens"}


def _column_type(name: str) -> str:
    if name in _TEXT or name.endswith("reason"):
        return "varchar"
    if name in _BOOLEAN:
        return "boolean"
    if name == "benchmark_seeds":
        return "ubigint[]"
    if name == "seed":
        return "ubigint"
    if name == "materialized_at":
        return "timestamp"
    if name in _BIGINT:
        return "bigint"
    if name in _INTEGER or name.startswith("n_") or name.endswith(("_n_envs", "_rows", "max_turns")):
        return "integer"
    return "double"


def contract_schema(model: Any) -> dg.TableSchema:
    """The columns of a file the export contract defines (a pydantic model of ``core/training/contract.py``, one
    field per column) with the fields' descriptions: the contract is the one place they are written."""
    kinds = {str: "string", int: "int", float: "float", bool: "bool"}
    return dg.TableSchema(columns=[
        dg.TableColumn(name, kinds.get(field.annotation, "string"), description=field.description)
        for name, field in model.model_fields.items()])


def round_for_display(value: Any) -> Any:
    """A cell for a metadata table read by people: NaN/inf/NA as None, numpy scalars as Python ones, a float by the
    plain rule of ``core.stats.rounding`` (an estimate with an interval is rounded by ``display_table``). Storage
    keeps full precision."""
    from envduels_dagster.core.stats.rounding import round_plain

    try:
        if value is None or value != value:  # NaN, pandas NA
            return None
    except (TypeError, ValueError):
        return None
    value = value.item() if hasattr(value, "item") else value
    return round_plain(value) if isinstance(value, float) else value


def rounded_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """Every plain float of a materialization's metadata rounded for people (``round_for_display``; issue 43:
    pass rates as 0.06944444444444445, cost as 0.29105549999999997); other values unchanged, order kept."""
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        if isinstance(value, dg.FloatMetadataValue):
            value = dg.MetadataValue.float(round_for_display(value.value)) if value.value is not None else value
        elif isinstance(value, float) or (hasattr(value, "item") and isinstance(value.item(), float)):
            value = round_for_display(value)
        out[key] = value
    return out


def _cell(value: Any) -> Any:
    """A cell already rounded (``core.stats.rounding.round_row``) as a plain Python value; missing ones None."""
    try:
        if value is None or value != value:
            return None
    except (TypeError, ValueError):
        return None
    return value.item() if hasattr(value, "item") else value


def display_table(rows: list[dict], columns: list[tuple[str, str]], table: str | None = None,
                  descriptions: dict[str, str] | None = None) -> dg.TableMetadataValue:
    """A sortable ``MetadataValue.table`` of ``rows`` (dicts) over ``columns`` (name, Dagster type), each column
    described (``descriptions``, else ``core/storage/column_docs.py`` for ``table``); an estimate and its interval
    rounded to what the interval justifies, other floats by the plain rule (``core.stats.rounding``)."""
    from envduels_dagster.core.storage.column_docs import describe

    def text(name: str) -> str | None:
        return (descriptions or {}).get(name) or (describe(table, name) if table else None)

    schema = dg.TableSchema(columns=[dg.TableColumn(name, kind, description=text(name)) for name, kind in columns])
    from envduels_dagster.core.stats.rounding import interval_columns, round_row

    names = [name for name, _ in columns]
    records = []
    for row in rows:
        rounded = round_row(row, interval_columns(list(row)))  # by the row's own intervals, shown or not
        records.append(dg.TableRecord({name: _cell(rounded.get(name)) for name in names}))
    return dg.MetadataValue.table(records=records, schema=schema)


def table_version(warehouse: Any, *tables: str, where: dict[str, object] | None = None) -> dg.DataVersion:
    """The data version of what an asset wrote: a hash of the content of ``tables`` (the rows matching
    ``where`` in each, run columns such as ``materialized_at`` excluded: ``core.storage.warehouse.RUN_COLUMNS``).

    Why every table asset states one: with a code version and no data version, Dagster derives the data
    version from the code version and the inputs' versions alone, which would call a re-authored (new)
    environment or a replayed pair against a changed model "unchanged". Unchanged content keeps its version,
    so Dagster marks nothing downstream stale and data-version automation does not fire."""
    from envduels_dagster.core.storage.warehouse import content_hash

    if hasattr(warehouse, "get_connection"):
        with warehouse.get_connection() as conn:
            return table_version(conn, *tables, where=where)
    import hashlib

    digests = [content_hash(warehouse, table, where) for table in tables]
    return dg.DataVersion(digests[0] if len(digests) == 1 else hashlib.sha256("|".join(digests).encode()).hexdigest()[:16])


def publish_if_passed(context: dg.AssetCheckExecutionContext, published: Any, asset_key: dg.AssetKey,
                      results: list[dg.AssetCheckResult], expected: list[str],
                      partition: str | None = None) -> list[dg.AssetCheckResult]:
    """The publish step of write-audit-publish, run by an asset's checks once all of them are evaluated.

    The checks evaluate the asset's latest materialization (of ``partition``), so its run's staged snapshot
    is promoted to the published one when every check in ``expected`` passed, and discarded otherwise
    (``PublishedTableIOManager.settle``). It happens before the results are reported: once Dagster records
    the checks as passed (what ``AFTER_CHECKED_TRAINING_SET`` waits for), the snapshot is already readable.
    Returns ``results`` with the outcome added to their metadata (visible in the UI)."""
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=[partition] if partition is not None else None),
        limit=1).records
    if not records:
        return results
    run_id = records[0].event_log_entry.run_id
    passed = all(r.passed for r in results) and {r.check_name for r in results} >= set(expected)
    outcome = published.settle(asset_key.path[-1], run_id, partition, passed)
    return [dg.AssetCheckResult(passed=r.passed, asset_key=r.asset_key, check_name=r.check_name, severity=r.severity,
                                description=r.description, metadata={**r.metadata, **outcome}) for r in results]
