"""What every area shares: owners, the export's automation condition, UI helpers, table metadata.

Why here: one definition of "publish only what passed its blocking checks", one timestamp
convention (naive UTC) for warehouse rows, and one way every table asset reports Dagster's standard
table metadata (``dagster/row_count``, ``dagster/column_schema``, ``dagster/table_name``), read from
the warehouse table itself rather than from the frame the asset meant to write.
"""

import datetime as dt
from typing import Any

import dagster as dg

from envduels_dagster.core.reporting import markdown_table

__all__ = ["AFTER_CHECKED_TRAINING_SET", "OWNERS", "markdown_table", "publish_if_passed", "table_metadata",
           "table_version", "utcnow"]

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


def table_metadata(warehouse: Any, table: str, where: dict[str, object] | None = None) -> dict[str, Any]:
    """Dagster's standard table metadata of warehouse ``table``: row count (of the rows matching ``where``,
    e.g. the partition's), column schema (the table's DuckDB columns) and qualified table name.

    ``warehouse``: an open DuckDB connection, or a resource with ``get_connection()`` (a short connection
    of its own is opened then). Read after the write, so it reports what the table holds."""
    from envduels_dagster.core.warehouse import describe_table

    if hasattr(warehouse, "get_connection"):
        with warehouse.get_connection() as conn:
            return table_metadata(conn, table, where)
    name, columns, rows = describe_table(warehouse, table, where)
    schema = dg.TableSchema(columns=[dg.TableColumn(column, ctype) for column, ctype in columns])
    return {"dagster/row_count": rows, "dagster/column_schema": schema, "dagster/table_name": name}


def table_version(warehouse: Any, *tables: str, where: dict[str, object] | None = None) -> dg.DataVersion:
    """The data version of what an asset wrote: a hash of the content of ``tables`` (the rows matching
    ``where`` in each, run columns such as ``materialized_at`` excluded: ``core.warehouse.RUN_COLUMNS``).

    Why every table asset states one: with a code version and no data version, Dagster derives the data
    version from the code version and the inputs' versions alone, which would call a re-authored (new)
    environment or a replayed pair against a changed model "unchanged". Unchanged content keeps its version,
    so Dagster marks nothing downstream stale and data-version automation does not fire."""
    from envduels_dagster.core.warehouse import content_hash

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
