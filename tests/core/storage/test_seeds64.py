"""Seeds are unsigned 64-bit everywhere: warehouse, protocol, exports, episodes, the sandbox.

An EnvDuels export with seeds up to 2**64-1 goes through ``envduels import`` (a real subprocess),
the warehouse, the sandbox (``reset(seed=...)`` receives the exact value) and a training export,
and comes back unchanged. A warehouse written with INTEGER seeds is widened in place, rows intact.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from envduels_dagster.core.protocol import MAX_SEED, EnvironmentSpec, EpisodeRecord
from envduels_dagster.core.storage.warehouse import (
    SCHEMA,
    WarehouseMigrationError,
    ensure_schema,
    episodes_frame,
    read_table,
    replace_rows,
    specs_from_rows,
)
from envduels_dagster.core.training.format import ExportFormatError, load_export
from tests.helpers.exports import write_export_dir

BIG_SEEDS = [0, 4191792089, 2**63 - 1, 2**63, MAX_SEED]


@pytest.mark.slow  # a few seconds or more (measured with --durations, loaded 2-core machine)
def test_an_export_with_64_bit_seeds_round_trips_through_import_sandbox_and_export(tmp_path, envduels_home):
    from envduels_dagster.core.sandbox import SandboxLimits
    from envduels_dagster.core.training.export import ExportItem, write_export
    from envduels_dagster.core.training.training_set import first_observations

    root = write_export_dir(tmp_path / "in", BIG_SEEDS)
    out = subprocess.run([sys.executable, "-m", "envduels_dagster.cli", "import", str(root), "--json"],
                         capture_output=True, text=True, env={**os.environ, "ENVDUELS_HOME": str(envduels_home)})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"env_id": "import:ext.echo", "author": "import:ext", "valid": True,
                                      "reason": None}
    with duckdb.connect(str(envduels_home / "warehouse.duckdb")) as conn:
        (dtype,) = conn.execute("SELECT data_type FROM information_schema.columns WHERE table_name = "
                                "'environments' AND column_name = 'benchmark_seeds'").fetchone()
        (spec,) = specs_from_rows(read_table(conn, "environments"))
    assert dtype == "UBIGINT[]"
    assert spec.benchmark_seeds == BIG_SEEDS and all(type(s) is int for s in spec.benchmark_seeds)

    # the exact seed reaches reset(seed=...) in the sandbox (validation replayed the reference on each)
    observations = asyncio.run(first_observations(spec.source, spec.class_name, spec.max_turns,
                                                  spec.benchmark_seeds, SandboxLimits()))
    assert observations == {s: f"seed={s}" for s in BIG_SEEDS}

    item = ExportItem(env_id=spec.env_id, author=spec.author, domain=spec.domain, class_name=spec.class_name,
                      max_turns=spec.max_turns, source=spec.source, source_sha256=spec.source_sha256,
                      hint=spec.hint, seeds=spec.benchmark_seeds, observations=observations, p_cold=0.0,
                      p_hint=1.0, lift=1.0, lift_lower=1.0, lift_upper=1.0)
    path = write_export(tmp_path / "out", "learner", [item], "v1")
    (again,) = load_export(path)
    assert again.benchmark_seeds == BIG_SEEDS and again.source == spec.source
    rows = [json.loads(line) for line in (path / "train.jsonl").read_text().splitlines()]
    assert [r["seed"] for r in rows] == BIG_SEEDS == [r["env_config"]["seed"] for r in rows]
    parquet = duckdb.sql(f"SELECT seed FROM '{path}/train.parquet' ORDER BY seed").fetchall()
    assert [s for (s,) in parquet] == BIG_SEEDS


def test_episodes_with_the_largest_seed_are_stored_and_read_back_exactly(tmp_path):
    rec = EpisodeRecord(env_id="e", author="a", solver="s", condition="cold", seed=MAX_SEED, status="failure",
                        stop_reason="max_turns")
    df = episodes_frame([rec, rec.model_copy(update={"seed": 4191792089})], {"e": 3}, "1", dt.datetime(2026, 1, 1))
    with duckdb.connect(str(tmp_path / "w.duckdb")) as conn:
        replace_rows(conn, "episodes", df, {"env_id": "e"})
        back = read_table(conn, "episodes")
    assert sorted(int(s) for s in back["seed"]) == [4191792089, MAX_SEED]


@pytest.mark.parametrize(("seed", "problem"), [
    (-1, "benchmark_seeds[1] -1 is outside 0..2**64-1 (seeds are unsigned 64-bit integers)"),
    (2**64, f"benchmark_seeds[1] {2**64} is outside 0..2**64-1 (seeds are unsigned 64-bit integers)"),
    (True, "benchmark_seeds[1] True is not an integer"),
    ("7", "benchmark_seeds[1] '7' is not an integer"),
    (1.5, "benchmark_seeds[1] 1.5 is not an integer"),
])
def test_a_seed_outside_64_bits_is_refused_naming_file_entry_and_index(tmp_path, seed, problem):
    root = write_export_dir(tmp_path / "in", [0, seed])
    with pytest.raises(ExportFormatError) as info:
        load_export(root)
    assert str(info.value) == (f"environment 'echo': e/meta.json: {problem}; "
                               "give seeds as JSON integers in 0..2**64-1")


def test_protocol_records_refuse_seeds_outside_64_bits():
    with pytest.raises(ValueError, match="less than or equal to 18446744073709551615"):
        EnvironmentSpec(env_id="x", author="a", class_name="C", max_turns=1, source="", benchmark_seeds=[2**64])
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        EpisodeRecord(env_id="e", author="a", solver="s", condition="cold", seed=-1, status="failure",
                      stop_reason="max_turns")


def old_warehouse(path: Path, seeds_env: str = "[4191792, 7]", seed_ep: int = 5) -> None:
    """A warehouse as the previous release wrote it: INTEGER seed columns, a view on top."""
    with duckdb.connect(str(path)) as conn:
        for table, columns in SCHEMA.items():
            conn.execute(f"CREATE TABLE {table} ({columns.replace('UBIGINT', 'INTEGER')})")
        conn.execute("CREATE VIEW authored_environments AS SELECT * FROM environments")
        conn.execute(f"INSERT INTO environments (env_id, author, benchmark_seeds, valid) VALUES "
                     f"('old', 'a', {seeds_env}, true)")
        conn.execute(f"INSERT INTO episodes (env_id, solver, seed, status) VALUES ('old', 's', {seed_ep}, 'success')")
        conn.execute("INSERT INTO training_set (learner, env_id, benchmark_seeds) VALUES ('l', 'old', [1, 2])")


def column_types(conn) -> dict:
    return {(t, c): d for t, c, d in conn.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE column_name IN ('seed', 'benchmark_seeds')").fetchall()}


def test_an_old_warehouse_with_integer_seeds_is_upgraded_in_place_with_rows_intact(tmp_path):
    path = tmp_path / "old.duckdb"
    old_warehouse(path)
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
        assert column_types(conn) == {("environments", "benchmark_seeds"): "UBIGINT[]",
                                      ("episodes", "seed"): "UBIGINT",
                                      ("training_set", "benchmark_seeds"): "UBIGINT[]",
                                      ("authored_environments", "benchmark_seeds"): "UBIGINT[]",
                                      ("duel_episodes", "seed"): "UBIGINT"}
        assert conn.execute("SELECT env_id, benchmark_seeds FROM authored_environments").fetchall() == [
            ("old", [4191792, 7])]
        assert conn.execute("SELECT env_id, seed, status FROM episodes").fetchall() == [("old", 5, "success")]
        # and the upgraded file takes 64-bit seeds next to the old rows
        conn.execute(f"INSERT INTO episodes (env_id, seed) VALUES ('new', {MAX_SEED})")
        assert conn.execute("SELECT max(seed) FROM episodes").fetchone()[0] == MAX_SEED
        ensure_schema(conn)  # idempotent


def test_a_negative_seed_stops_the_migration_naming_the_rows_and_changes_nothing(tmp_path):
    path = tmp_path / "old.duckdb"
    old_warehouse(path, seed_ep=-3)
    with duckdb.connect(str(path)) as conn:
        with pytest.raises(WarehouseMigrationError) as info:
            ensure_schema(conn)
        assert str(info.value) == (
            "table episodes, column seed: 1 row(s) hold a negative seed, which cannot become UBIGINT (seeds are "
            "0..2**64-1); delete or renumber those rows (SELECT * FROM episodes WHERE seed < 0) and run again")
        types = column_types(conn)
        assert types[("episodes", "seed")] == "INTEGER"
        assert types[("environments", "benchmark_seeds")] == "INTEGER[]"  # the whole migration rolled back
        assert conn.execute("SELECT seed FROM episodes").fetchall() == [(-3,)]


def test_extra_adaptive_seeds_stay_inside_64_bits():
    from envduels_dagster.core.play.adaptive import extra_seeds

    assert extra_seeds([0, 1, 2, 3], 6) == [0, 1, 2, 3, 4, 5]  # unchanged for ordinary seeds
    assert extra_seeds([MAX_SEED - 1, 0], 5) == [MAX_SEED - 1, 0, MAX_SEED, 1, 2]
