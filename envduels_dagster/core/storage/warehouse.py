"""The DuckDB warehouse: table contract and partition-exact writes.

Why delete+insert in one transaction: a partition's rows are replaced exactly,
so re-materializing a pair never duplicates or half-writes rows, and readers
see either the old rows or the new ones. Takes a plain DuckDB connection so
that it is usable without Dagster (tests, notebooks, the CLI).

The same code serves both storage profiles (``core/storage/location.py``): a DuckDB file,
or a DuckLake catalog shared by several writer processes. On DuckLake a commit
can lose a race with another writer; every transaction here is then re-run whole
(``retry_conflicts``), and DuckLake's missing PRIMARY KEY support is the one
difference in the table definitions.
"""

from __future__ import annotations

import json
import weakref

import pandas as pd

from envduels_dagster.core.storage.location import catalog_kind, retry_conflicts

SCHEMA = {
    "model_registry": """
        name VARCHAR PRIMARY KEY, model VARCHAR, api_base VARCHAR, api_key_env VARCHAR, version VARCHAR,
        pool VARCHAR, provider VARCHAR, simulated BOOLEAN, temperature DOUBLE, max_tokens INTEGER,
        max_concurrency INTEGER, requests_per_minute DOUBLE, client VARCHAR, input_cost_per_mtok DOUBLE,
        output_cost_per_mtok DOUBLE, roles VARCHAR, budget_usd DOUBLE, timeout_s DOUBLE, params VARCHAR,
        reasoning_cost_per_mtok DOUBLE, tokens_per_minute DOUBLE, max_in_flight INTEGER, max_reply_bytes BIGINT""",
    "environments": """
        env_id VARCHAR, author VARCHAR, round INTEGER, domain VARCHAR, family VARCHAR, class_name VARCHAR,
        max_turns INTEGER, source VARCHAR, source_sha256 VARCHAR, hint VARCHAR, benchmark_seeds UBIGINT[],
        valid BOOLEAN, reject_reason VARCHAR, winnability VARCHAR, parent_env_id VARCHAR,
        author_version VARCHAR, author_meta VARCHAR, materialized_at TIMESTAMP, author_calls INTEGER,
        author_prompt_tokens BIGINT, author_completion_tokens BIGINT, author_cost_usd DOUBLE, prompt_version VARCHAR""",
    "episodes": """
        env_id VARCHAR, author VARCHAR, solver VARCHAR, round INTEGER, condition VARCHAR, seed UBIGINT,
        status VARCHAR,
        stop_reason VARCHAR, turns INTEGER, max_turns INTEGER, format_errors INTEGER, final_reward DOUBLE,
        prompt_tokens BIGINT, completion_tokens BIGINT, cost_usd DOUBLE, latency_s DOUBLE, model_calls INTEGER,
        cached_calls INTEGER, retries INTEGER, retry_errors VARCHAR, error VARCHAR, transcript VARCHAR, is_self_pair BOOLEAN, solver_version VARCHAR,
        materialized_at TIMESTAMP, sampling VARCHAR, reasoning_tokens BIGINT, finish_reasons VARCHAR""",
    # Per round (0 = original authoring, r = hardening round r), like every mart: rounds never pool. A warehouse
    # written before rounds gains the column (last, value 0) in place; readers and writers go by column name.
    "pair_lift": """
        round INTEGER, author VARCHAR, solver VARCHAR, is_self_pair BOOLEAN, n_envs INTEGER, n_matched INTEGER,
        n_incomplete INTEGER, p_cold DOUBLE, p_hint DOUBLE, lift DOUBLE, lift_boot_lower DOUBLE,
        lift_boot_upper DOUBLE, lift_ci_lower DOUBLE, lift_ci_upper DOUBLE, lift_ci_reason VARCHAR,
        lift_boot_reason VARCHAR""",
    "authoring_progress": """
        author VARCHAR, round INTEGER, n_pairs INTEGER, solver_skill DOUBLE, design_before DOUBLE,
        design_after DOUBLE, design_change DOUBLE, design_change_lower DOUBLE, design_change_upper DOUBLE,
        hint_before DOUBLE, hint_after DOUBLE, hint_change DOUBLE, hint_change_lower DOUBLE,
        hint_change_upper DOUBLE, design_change_reason VARCHAR, hint_change_reason VARCHAR""",
    "lift_learning": """
        learner VARCHAR, author VARCHAR, lift DOUBLE, n_train_envs INTEGER, n_heldout_envs INTEGER,
        cold_before DOUBLE, cold_after DOUBLE, gain DOUBLE""",
    "author_value": """
        learner VARCHAR, author VARCHAR, is_self BOOLEAN, status VARCHAR, n_slots INTEGER, n_envs INTEGER,
        n_written INTEGER, n_valid INTEGER, validity_rate DOUBLE, n_unplayed INTEGER, n_seeds INTEGER,
        expected_learnable DOUBLE, per_env DOUBLE, per_env_lower DOUBLE, per_env_upper DOUBLE, author_calls INTEGER,
        author_tokens BIGINT, author_cost_usd DOUBLE, priced BOOLEAN, price_note VARCHAR, per_usd DOUBLE,
        per_usd_lower DOUBLE, per_usd_upper DOUBLE, per_kcall DOUBLE, per_kcall_lower DOUBLE, per_kcall_upper DOUBLE,
        eval_calls INTEGER, eval_cost_usd DOUBLE, rank_basis VARCHAR, rank INTEGER, rank_lower INTEGER,
        rank_upper INTEGER, p_best DOUBLE""",
    "author_value_mix": """
        learner VARCHAR, author VARCHAR, currency VARCHAR, budget DOUBLE, share DOUBLE, envs_to_write DOUBLE,
        expected_learnable DOUBLE, expected_lower DOUBLE, expected_upper DOUBLE""",
    "training_set": """
        learner VARCHAR, env_id VARCHAR, author VARCHAR, domain VARCHAR, class_name VARCHAR, max_turns INTEGER,
        source_sha256 VARCHAR, hint VARCHAR, benchmark_seeds UBIGINT[], n_seeds INTEGER, p_cold DOUBLE,
        p_hint DOUBLE, lift DOUBLE, lift_lower DOUBLE, lift_upper DOUBLE, rank INTEGER, p_learnable DOUBLE,
        admission_method VARCHAR, admission_threshold DOUBLE, cold_ceiling DOUBLE, prior_rows INTEGER""",
}

# Values given to rows written before a column existed (everything before rounds was round 0).
# author_calls: every environment row is exactly one authoring or hardening call (its cost stays unknown).
# reasoning_tokens: none were reported before they were counted (finish_reasons stays NULL: not kept then).
MIGRATION_DEFAULTS = {"round": "0", "author_calls": "1", "sampling": "'fixed'", "reasoning_tokens": "0"}

# Seed columns are UBIGINT (unsigned 64-bit, see protocol.Seed). Warehouses written before that held
# INTEGER seeds: ensure_schema widens those columns in place, in one transaction, rows intact.
WIDENINGS = {("INTEGER", "UBIGINT"), ("INTEGER[]", "UBIGINT[]"), ("BIGINT", "UBIGINT"), ("BIGINT[]", "UBIGINT[]")}


class WarehouseMigrationError(RuntimeError):
    pass


# Friendly aliases named after the Dagster assets that write the contract tables.
VIEWS = {"authored_environments": "environments", "duel_episodes": "episodes"}


# Connections whose warehouse schema is known to be current (checked on them, or by the same run on
# another connection: resources/paths.WarehouseResource), so ensure_schema costs nothing on them again.
# The schema only ever grows, and only through ensure_schema. Weak: a closed, dropped connection leaves.
_CHECKED: weakref.WeakSet = weakref.WeakSet()


def ensure_schema(conn) -> None:
    """Create missing tables, and add columns that newer versions introduced (no data is dropped).

    Once per connection (issue 35: the check's catalog queries took most of a small read's time):
    a connection it already passed on, or one :func:`mark_schema_checked` vouches for, is not checked again."""
    if is_schema_checked(conn):
        return
    retry_conflicts(lambda: _ensure_schema(conn))
    mark_schema_checked(conn)


def mark_schema_checked(conn) -> None:
    """Record that ``conn``'s warehouse schema is current (this run checked it on another connection)."""
    try:
        _CHECKED.add(conn)
    except TypeError:  # a connection type without weak references: checked every time, as before
        pass


def is_schema_checked(conn) -> bool:
    try:
        return conn in _CHECKED
    except TypeError:
        return False


def _ensure_schema(conn) -> None:
    current = conn.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = 'main' AND table_catalog = current_database()").fetchall()
    existing = {(t, c) for t, c, _ in current}
    tables = {t for t, _ in existing}
    views = {v for (v,) in conn.execute(
        "SELECT view_name FROM duckdb_views() WHERE database_name = current_database() AND NOT internal").fetchall()}
    if all(t in tables for t in SCHEMA) and all(v in views for v in VIEWS) and not _missing_columns(existing):
        _widen_columns(conn, current)
        return  # nothing to create: no DDL, so concurrent writers do not conflict on the catalog
    ducklake = catalog_kind(conn) == "ducklake"
    _widen_columns(conn)
    for table, columns in SCHEMA.items():
        if table not in tables:
            if ducklake:  # DuckLake has no PRIMARY KEY/UNIQUE constraints
                columns = columns.replace(" PRIMARY KEY", "")
            conn.execute(f"CREATE TABLE IF NOT EXISTS {table} ({columns})")
            continue
        for column in _columns(table):
            name, ctype = column.split()[0], column.split()[1]
            if (table, name) not in existing:
                default = f" DEFAULT {MIGRATION_DEFAULTS[name]}" if name in MIGRATION_DEFAULTS else ""
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {ctype}{default}")
    for view, table in VIEWS.items():
        conn.execute(f"CREATE VIEW IF NOT EXISTS {view} AS SELECT * FROM {table}")


def _missing_columns(existing: set[tuple[str, str]]) -> bool:
    return any((table, column.split()[0]) not in existing for table in SCHEMA for column in _columns(table))


def _widen_columns(conn, current: list | None = None) -> None:
    """Change old column types to the contract's where that only widens them (INTEGER seeds -> UBIGINT).

    ``current``: the (table, column, type) rows of information_schema.columns when the caller has them.
    All in one transaction: a failure (a negative seed cannot become unsigned) leaves every column
    as it was and names the table, the column and the rows to fix."""
    if current is None:
        current = conn.execute("SELECT table_name, column_name, data_type FROM information_schema.columns "
                               "WHERE table_schema = 'main' AND table_catalog = current_database()").fetchall()
    todo = []
    for table, name, dtype in current:
        if table not in SCHEMA:
            continue
        wanted = {c.split()[0]: c.split()[1] for c in _columns(table)}.get(name)
        if wanted is not None and (dtype, wanted) in WIDENINGS:
            todo.append((table, name, dtype, wanted))
    if not todo:
        return
    conn.execute("BEGIN TRANSACTION")
    try:
        for table, name, _dtype, wanted in todo:
            test = f"list_min({name}) < 0" if wanted.endswith("[]") else f"{name} < 0"
            (bad,) = conn.execute(f"SELECT count(*) FROM {table} WHERE {test}").fetchone()
            if bad:
                raise WarehouseMigrationError(
                    f"table {table}, column {name}: {bad} row(s) hold a negative seed, which cannot become "
                    f"{wanted} (seeds are 0..2**64-1); delete or renumber those rows "
                    f"(SELECT * FROM {table} WHERE {test}) and run again")
            conn.execute(f"ALTER TABLE {table} ALTER COLUMN {name} TYPE {wanted}")
        for view, table in VIEWS.items():  # a view keeps the column types it was created with
            if table in {t for t, *_ in todo}:
                conn.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM {table}")
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise


def _where(where: dict[str, object] | None) -> tuple[str, list]:
    """SQL condition and parameters: equality per column, or IN for a list of values."""
    parts, params = [], []
    for col, value in (where or {}).items():
        if isinstance(value, (list, tuple, set)):
            values = list(value)
            parts.append(f"{col} IN ({', '.join('?' * len(values))})" if values else "FALSE")
            params += values
        else:
            parts.append(f"{col} = ?")
            params.append(value)
    return " AND ".join(parts) or "TRUE", params


def _in_transaction(conn, df: pd.DataFrame, statements: list[tuple[str, list]]) -> None:
    """Run ``statements`` (which may read ``df`` as ``_incoming``) in one transaction, re-run on a conflict."""
    conn.register("_incoming", df)
    try:
        retry_conflicts(lambda: _transaction(conn, statements))
    finally:
        conn.unregister("_incoming")


def _transaction(conn, statements: list[tuple[str, list]]) -> None:
    conn.execute("BEGIN TRANSACTION")
    try:
        for sql, params in statements:
            conn.execute(sql, params)
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise


def _rollback(conn) -> None:
    """ROLLBACK unless the failed COMMIT already ended the transaction (DuckLake conflicts do)."""
    try:
        conn.execute("ROLLBACK")
    except Exception as exc:  # "no transaction is active"
        if "no transaction" not in str(exc).lower():
            raise


def replace_rows(conn, table: str, df: pd.DataFrame, where: dict[str, object] | None = None) -> int:
    """Replace the rows matching ``where`` (all rows if None) with ``df``, atomically."""
    ensure_schema(conn)
    clause, params = _where(where)
    statements = [(f"DELETE FROM {table} WHERE {clause}", params)]
    if len(df):
        statements.append((f"INSERT INTO {table} BY NAME SELECT * FROM _incoming", []))
    _in_transaction(conn, df, statements)
    return len(df)


def replace_table(conn, table: str, df: pd.DataFrame) -> None:
    """Replace a whole result table whose columns follow ``df`` (Python results outside the contract)."""
    _in_transaction(conn, df, [(f"CREATE OR REPLACE TABLE {table} AS SELECT * FROM _incoming", [])])


def read_table(conn, table: str, where: dict[str, object] | None = None) -> pd.DataFrame:
    ensure_schema(conn)
    clause, params = _where(where)
    return conn.execute(f"SELECT * FROM {table} WHERE {clause}", params).df()


def environments_frame(specs, author_version: str, now) -> pd.DataFrame:
    rows = [{**s.model_dump(exclude={"author_meta"}), "author_meta": json.dumps(s.author_meta),
             "author_version": author_version, "materialized_at": now} for s in specs]
    return pd.DataFrame(rows, columns=[c.split()[0] for c in _columns("environments")])


def specs_from_rows(df: pd.DataFrame):
    """EnvironmentSpecs back from ``environments`` rows (the inverse of ``environments_frame``)."""
    from envduels_dagster.core.protocol import EnvironmentSpec

    specs = []
    for row in df.to_dict("records"):
        data = {k: v for k, v in row.items() if k in EnvironmentSpec.model_fields and v is not None
                and not (isinstance(v, float) and v != v)}
        data["benchmark_seeds"] = [int(x) for x in row["benchmark_seeds"]]
        data["author_meta"] = json.loads(row.get("author_meta") or "{}")
        specs.append(EnvironmentSpec(**data))
    return specs


def episodes_frame(records, max_turns: dict[str, int], solver_version: str, now,
                   rounds: dict[str, int] | None = None) -> pd.DataFrame:
    rows = []
    for r in records:
        row = r.model_dump()
        row["transcript"] = json.dumps(row["transcript"])
        row["retry_errors"] = ",".join(row["retry_errors"])
        row["finish_reasons"] = json.dumps(row["finish_reasons"])
        row.update(is_self_pair=r.author == r.solver, max_turns=max_turns[r.env_id],
                   round=(rounds or {}).get(r.env_id, 0),
                   solver_version=solver_version, materialized_at=now)
        rows.append(row)
    return pd.DataFrame(rows, columns=[c.split()[0] for c in _columns("episodes")])


def _columns(table: str) -> list[str]:
    return [c.strip() for c in SCHEMA[table].split(",") if c.strip()]


def describe_table(conn, table: str, where: dict[str, object] | None = None) -> tuple[str, list[tuple[str, str]], int]:
    """``table`` as it is in the warehouse: its qualified name (``<catalog>.<schema>.<table>``, as a reader
    of this warehouse names it), its columns with their DuckDB types, and how many rows match ``where``
    (a partition's rows; all rows if None)."""
    catalog, schema = conn.execute("SELECT current_database(), current_schema()").fetchone()
    columns = [(str(name), str(ctype)) for name, ctype, *_ in conn.execute(f"DESCRIBE {table}").fetchall()]
    clause, params = _where(where)
    (rows,) = conn.execute(f"SELECT count(*) FROM {table} WHERE {clause}", params).fetchone()
    return f"{catalog}.{schema}.{table}", columns, int(rows)


# Columns that record how a run went (when, how fast, what the call cache served, transport retries),
# not what it produced: a table's content version leaves them out, so replaying an unchanged pair from
# the call cache keeps its version and marks nothing downstream as changed.
RUN_COLUMNS = {"environments": ("materialized_at",),
               "episodes": ("materialized_at", "latency_s", "cached_calls", "retries", "retry_errors")}


def content_hash(conn, table: str, where: dict[str, object] | None = None) -> str:
    """A hash of the rows of ``table`` matching ``where``, in no particular order, run columns excluded:
    equal content, equal hash (computed in DuckDB, nothing is loaded into Python)."""
    present = {str(r[0]) for r in conn.execute(f"DESCRIBE {table}").fetchall()}
    run = [c for c in RUN_COLUMNS.get(table, ()) if c in present]
    body = f"* EXCLUDE ({', '.join(run)})" if run else "*"
    clause, params = _where(where)
    (digest,) = conn.execute(
        "SELECT md5(coalesce(string_agg(r, chr(10) ORDER BY r), '')) FROM "
        f"(SELECT CAST(to_json(t) AS VARCHAR) AS r FROM (SELECT {body} FROM {table} WHERE {clause}) AS t)",
        params).fetchone()
    return str(digest)[:16]
