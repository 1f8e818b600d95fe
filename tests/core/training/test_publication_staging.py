"""core/publication's write-audit-publish, without Dagster: staged rows are invisible until promoted."""

import duckdb
import pandas as pd

from envduels_dagster.core.training.publication import (
    STAGED,
    describe,
    discard,
    promote,
    read_snapshot,
    snapshot_path,
    stage,
    staged_path,
)


def rows(*env_ids: str) -> pd.DataFrame:
    return pd.DataFrame({"learner": ["novice"] * len(env_ids), "env_id": list(env_ids)})


def visible(root) -> int:
    with duckdb.connect() as conn:
        return conn.execute(f"SELECT count(*) FROM '{root}/t/*.parquet'").fetchone()[0]


def test_staged_rows_are_invisible_until_promoted_and_a_discarded_set_never_replaces_the_last(tmp_path):
    root = tmp_path / "published"
    stage(root, "t", rows("a", "b"), "run-1", "novice")
    assert not snapshot_path(root, "t", "novice").exists() and staged_path(root, "t", "run-1", "novice").is_file()
    assert promote(root, "t", "run-1", "novice").written
    assert list(read_snapshot(root, "t", ["novice"])["run_id"]) == ["run-1", "run-1"]

    stage(root, "t", rows("bad"), "run-2", "novice")  # its checks fail
    assert visible(root) == 2 and describe(snapshot_path(root, "t", "novice")).run_id == "run-1"
    assert discard(root, "t", "run-2", "novice")
    assert not (root / STAGED).exists()  # nothing left behind
    assert promote(root, "t", "run-2", "novice") is None  # a discarded set cannot be published later
    assert list(read_snapshot(root, "t", ["novice"])["env_id"]) == ["a", "b"]

    stage(root, "t", rows("a", "b"), "run-3", "novice")  # unchanged content: the published file is kept
    kept = promote(root, "t", "run-3", "novice")
    assert not kept.written and kept.run_id == "run-1" and not (root / STAGED).exists()

    stage(root, "t", rows("c"), "run-4", "novice")  # never checked ...
    stage(root, "t", rows("d"), "run-5", "novice")  # ... superseded by a newer materialization
    assert [p.parent.name for p in (root / STAGED / "t").glob("*/novice.parquet")] == ["run-5"]
    assert promote(root, "t", "run-5", "novice").run_id == "run-5"
    assert promote(root, "t", "run-5", "novice").run_id == "run-5"  # the checks re-run: already published
    assert list(read_snapshot(root, "t", ["novice"])["env_id"]) == ["d"] and visible(root) == 1
    assert sorted(p.name for p in (root / "t").iterdir()) == ["novice.parquet"]
