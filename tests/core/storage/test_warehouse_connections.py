"""Issue 35: the warehouse schema is checked once per run, not on every read and write.

A real DuckDB file and real Dagster runs through ``WarehouseResource`` (what the definitions use). The
full schema check (``_ensure_schema``'s catalog queries) is counted by wrapping the real function.
"""

from __future__ import annotations

import dagster as dg
import duckdb
import pytest

from envduels_dagster.core.storage import warehouse as wh
from envduels_dagster.resources import WarehouseResource


@pytest.fixture
def checks(monkeypatch):
    count = [0]
    real = wh._ensure_schema

    def counted(conn):
        count[0] += 1
        return real(conn)

    monkeypatch.setattr(wh, "_ensure_schema", counted)
    return count


@dg.asset(required_resource_keys={"warehouse"})
def reads_three_times(context) -> None:
    for _ in range(3):  # three connections, as a pair stage's prepare, write and checks open theirs
        with context.resources.warehouse.get_connection() as conn:
            assert wh.read_table(conn, "episodes", {"author": "a"}).empty


def test_one_schema_check_per_run_and_a_new_run_checks_again(tmp_path, checks):
    path = tmp_path / "warehouse.duckdb"
    resource = WarehouseResource(database=str(path))
    assert dg.materialize([reads_three_times], resources={"warehouse": resource}).success
    assert checks[0] == 1
    # A later run checks again: the file may be new. Here it is: deleted, so its tables are recreated.
    path.unlink()
    assert dg.materialize([reads_three_times], resources={"warehouse": resource}).success
    assert checks[0] == 2
    with duckdb.connect(str(path)) as conn:
        assert {"episodes", "environments"} <= {t for (t,) in conn.execute("SHOW TABLES").fetchall()}
    # Outside a run (the CLI, notebooks) nothing is vouched for: every connection is checked on its own.
    for _ in range(2):
        with resource.get_connection() as conn:
            wh.read_table(conn, "episodes")
    assert checks[0] == 4


def test_a_connection_is_checked_once_and_a_failed_check_is_not_remembered(tmp_path, checks):
    conn = duckdb.connect(str(tmp_path / "w.duckdb"))
    try:
        wh.read_table(conn, "episodes")
        wh.replace_rows(conn, "episodes", wh.episodes_frame([], {}, "1", None), {"author": "a"})
        assert checks[0] == 1 and wh.is_schema_checked(conn)
    finally:
        conn.close()
    # An old warehouse whose seeds cannot be widened: the check fails, names the fix, and is tried again
    # on the next use instead of being taken as passed.
    old = duckdb.connect(str(tmp_path / "old.duckdb"))
    try:
        old.execute("CREATE TABLE episodes (env_id VARCHAR, author VARCHAR, seed INTEGER)")
        old.execute("INSERT INTO episodes VALUES ('e', 'a', -1)")
        for _ in range(2):
            with pytest.raises(wh.WarehouseMigrationError, match="negative seed"):
                wh.read_table(old, "episodes")
        assert not wh.is_schema_checked(old) and checks[0] == 3
        assert old.execute("SELECT seed FROM episodes").fetchall() == [(-1,)]  # nothing changed
    finally:
        old.close()
