"""One solver ranking for the CLI and the report (issue 42): the demo's leaderboard named the best solver by pooled
cold success, the report by ``rankings.solver_rank`` (per-domain means); they disagreed (oracle against expert).
Now the leaderboard orders solvers by ``solver_rank``, as the report does. A real DuckDB file, built by hand so
that the two orders differ."""

from __future__ import annotations

import duckdb
import pandas as pd

from envduels_dagster.cli.demo import leaderboard
from envduels_dagster.core.storage.warehouse import ensure_schema, replace_rows


def _episodes(solver: str, author: str, cold_wins: int, envs: int) -> list[dict]:
    rows = []
    for e in range(envs):
        for condition in ("cold", "hinted"):
            ok = condition == "hinted" or e < cold_wins
            rows.append({"env_id": f"{author}.{e}", "author": author, "solver": solver, "round": 0,
                         "condition": condition, "seed": 0, "status": "success" if ok else "failure"})
    return rows


def test_the_leaderboard_ranks_solvers_as_the_report_does_not_by_pooled_success(tmp_path):
    db = tmp_path / "w.duckdb"
    # pooled cold success: oracle 6/10 = 0.6 beats expert 5/10 = 0.5; the rankings table says expert is first
    eps = pd.DataFrame(_episodes("oracle", "a", 6, 10) + _episodes("expert", "a", 5, 10))
    rankings_df = pd.DataFrame({"round": [0, 0], "model": ["oracle", "expert"], "solver_rank": [2.0, 1.0],
                             "solver_score": [0.4, 0.55]})
    with duckdb.connect(str(db)) as conn:
        ensure_schema(conn)
        replace_rows(conn, "episodes", eps)
        conn.register("rankings_df", rankings_df)
        conn.execute("CREATE TABLE rankings AS SELECT * FROM rankings_df")  # as the rankings asset writes it
        report_order = [m for (m,) in conn.execute(
            "SELECT model FROM rankings ORDER BY solver_rank NULLS LAST, model").fetchall()]  # the report's query
    text = leaderboard(str(db))
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Solvers (ranked by solver_rank"))
    listed = [ln.split()[0] for ln in lines[start + 2:start + 4]]
    assert listed == report_order == ["expert", "oracle"]
    assert lines[start + 2].split()[:4] == ["expert", "1", "0.50", "1.00"]  # rank, then pooled cold and hinted


def test_without_rankings_the_leaderboard_falls_back_to_pooled_success_and_says_no_rank(tmp_path):
    db = tmp_path / "w.duckdb"
    eps = pd.DataFrame(_episodes("oracle", "a", 6, 10) + _episodes("expert", "a", 5, 10))
    with duckdb.connect(str(db)) as conn:
        ensure_schema(conn)
        replace_rows(conn, "episodes", eps)
        conn.execute("DROP TABLE IF EXISTS rankings")
    lines = leaderboard(str(db)).splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Solvers (ranked by solver_rank"))
    assert [ln.split()[:2] for ln in lines[start + 2:start + 4]] == [["oracle", "-"], ["expert", "-"]]
