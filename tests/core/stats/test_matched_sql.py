"""The matched seed and the category rule have one definition per language, and the two agree.

SQL: the dbt macros ``matched_seeds``, ``committed_seed`` and ``category`` (dbt_project/macros/matched_seeds.sql),
rendered here with Jinja exactly as dbt renders them. Python: ``core/stats/matched_sql.py`` (run by the asset
checks in the warehouse and by ``core/stats/lift.matched_seeds`` on data frames) and ``core/stats/rules.py``.
Both run on one DuckDB warehouse holding every case that decides a matched seed.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import jinja2
import numpy as np
import pandas as pd
import pytest

from envduels_dagster.core.stats import categorize, matched_seeds
from envduels_dagster.core.stats.matched_sql import COMMITTED, matched_seeds_sql
from envduels_dagster.core.storage.warehouse import ensure_schema

ROOT = Path(__file__).resolve().parents[3]
MACROS = ROOT / "dbt_project" / "macros" / "matched_seeds.sql"
KEYS = ["round", "env_id", "author", "solver"]


def macros():
    """The dbt macro file as a Jinja module (its macros use no dbt context: dbt renders them the same way)."""
    return jinja2.Environment().from_string(MACROS.read_text()).module


def episode(env, solver, seed, condition, status, round_=0, sampling=None, author="A"):
    return {"round": round_, "env_id": env, "author": author, "solver": solver, "seed": seed,
            "condition": condition, "status": status, "sampling": sampling}


def rows() -> list[dict]:
    out = []
    for seed, (cold, hinted) in enumerate([("success", "failure"), ("failure", "success"), ("failure", "failure"),
                                           ("success", "success")]):
        out += [episode("E1", "S", seed, "cold", cold), episode("E1", "S", seed, "hinted", hinted)]
    out += [episode("E1", "S", 4, "cold", "incomplete"), episode("E1", "S", 4, "hinted", "success"),  # incomplete
            episode("E1", "S", 5, "hinted", "success"),  # no cold episode
            episode("E1", "S", 6, "cold", "success"), episode("E1", "S", 6, "hinted", "error"),  # a played status
            episode("E1", "S", 7, "cold", "failure", sampling="adaptive"),  # played conditionally
            episode("E1", "S", 7, "hinted", "success", sampling="adaptive"),
            episode("E1", "S", 8, "cold", "failure", sampling="fixed"), episode("E1", "S", 8, "hinted", "success"),
            episode("E1", "A", 0, "cold", "failure"), episode("E1", "A", 0, "hinted", "success"),  # self pair
            episode("E1", "S", 0, "cold", "success", round_=1), episode("E1", "S", 0, "hinted", "failure", round_=1),
            episode("E2", "S", 2**64 - 1, "cold", "failure", author="B"),  # the largest seed
            episode("E2", "S", 2**64 - 1, "hinted", "success", author="B")]
    return out


@pytest.fixture
def warehouse(tmp_path):
    conn = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    ensure_schema(conn)
    df = pd.DataFrame(rows())
    conn.register("df", df)
    conn.execute("INSERT INTO episodes BY NAME SELECT * FROM df")
    conn.unregister("df")
    yield conn
    conn.close()


def run(conn, sql: str) -> pd.DataFrame:
    return conn.execute(f"SELECT * FROM ({sql}) ORDER BY ALL").df()


@pytest.mark.parametrize("committed", [False, True], ids=["all seeds", "committed seeds"])
def test_the_dbt_macro_and_the_python_sql_give_the_same_matched_seeds(warehouse, committed):
    m = macros()
    dbt_sql = m.matched_seeds("episodes", KEYS, m.committed_seed() if committed else "true")
    py_sql = matched_seeds_sql("episodes", KEYS, COMMITTED if committed else "TRUE")
    dbt, py = run(warehouse, str(dbt_sql)), run(warehouse, py_sql)
    pd.testing.assert_frame_equal(dbt, py)
    got = {(r.round, r.author, r.solver, int(r.seed)): (r.y_cold, r.y_hint) for r in py.itertuples()}
    expected = {(0, "A", "S", 0): (1.0, 0.0), (0, "A", "S", 1): (0.0, 1.0), (0, "A", "S", 2): (0.0, 0.0),
                (0, "A", "S", 3): (1.0, 1.0), (0, "A", "S", 6): (1.0, 0.0), (0, "A", "S", 8): (0.0, 1.0),
                (0, "A", "A", 0): (0.0, 1.0), (1, "A", "S", 0): (1.0, 0.0), (0, "B", "S", 2**64 - 1): (0.0, 1.0)}
    if not committed:
        expected[(0, "A", "S", 7)] = (0.0, 1.0)
    assert got == expected  # seeds 4 (incomplete) and 5 (no cold episode) are never matched


def test_the_python_matched_seeds_on_a_frame_are_the_warehouse_ones(warehouse):
    frame = pd.DataFrame(rows())
    py = matched_seeds(frame)
    sql = run(warehouse, matched_seeds_sql("episodes", KEYS))
    pd.testing.assert_frame_equal(py.reset_index(drop=True), sql, check_dtype=False)
    assert matched_seeds(frame[frame["status"] == "incomplete"]).empty


def test_the_dbt_category_macro_is_the_python_rule():
    rates = np.array([0.0, 1e-9, 0.25, 0.5, 1.0])
    grid = pd.DataFrame([(c, h) for c in rates for h in rates], columns=["p_cold", "p_hint"])
    with duckdb.connect() as conn:
        conn.register("grid", grid)
        sql = conn.execute(f"SELECT {macros().category('p_cold', 'p_hint')} AS category FROM grid").df()
    assert sql["category"].tolist() == list(categorize(grid["p_cold"].to_numpy(), grid["p_hint"].to_numpy()))


def test_the_matched_seed_is_defined_once_per_language():
    """Counting the places that define it: the dbt macro in SQL, matched_sql.py in Python."""
    marker = "'hinted'"  # every definition pairs the hinted condition with the cold one
    sql_homes = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "dbt_project").rglob("*.sql")
                       if marker in p.read_text() and "tests" not in p.parts)
    assert sql_homes == ["dbt_project/macros/matched_seeds.sql"]
    raw_rates = {"envduels_dagster/cli/demo.py"}  # prints raw success per condition, not matched seeds
    python_homes = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "envduels_dagster").rglob("*.py")
                          if "condition = 'hinted'" in p.read_text() and p.relative_to(ROOT / "envduels_dagster").parts[0] != "sim")
    assert sorted(set(python_homes) - raw_rates) == ["envduels_dagster/core/stats/matched_sql.py"]
