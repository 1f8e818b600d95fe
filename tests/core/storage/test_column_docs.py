"""``core/storage/column_docs.py`` documents every column of the tables the Python assets write, and nothing else.

The dbt marts' columns are documented in ``dbt_project/models/marts/schema.yml`` (one source each: dagster-dbt
reads it); ``pair_lift``, in the warehouse contract for readers, is a dbt model, so its lines are checked there.
"""

from __future__ import annotations

import pandas as pd
import yaml

from envduels_dagster.core.storage.column_docs import DOCS, describe
from envduels_dagster.core.storage.warehouse import SCHEMA, _columns
from tests.helpers.paths import REPO

PUBLISHED = {"run_id", "data_version"}  # provenance the published snapshots add


def test_every_warehouse_table_column_is_documented_once():
    dbt = {m["name"]: [c["name"] for c in m.get("columns", []) if (c.get("description") or "").strip()]
           for m in yaml.safe_load((REPO / "dbt_project/models/marts/schema.yml").read_text())["models"]}
    for table in SCHEMA:
        columns = [c.split()[0] for c in _columns(table)]
        if table in dbt:
            assert table not in DOCS, f"{table}: documented in dbt's schema.yml, not twice"
            assert set(columns) <= set(dbt[table]), (table, set(columns) - set(dbt[table]))
            continue
        documented = set(DOCS[table]) - PUBLISHED
        assert documented == set(columns), (table, set(columns) ^ documented)
        assert all(DOCS[table][c].strip() for c in columns), table


def test_result_tables_outside_the_contract_are_documented_column_for_column():
    from envduels_dagster.core.rankings.convergence import design_convergence
    from envduels_dagster.core.rankings.progress import COLUMNS as PROGRESS
    from envduels_dagster.core.studies.learning import COLUMNS as LEARNING
    from envduels_dagster.core.value.author_value import MIX_COLUMNS

    envs = pd.DataFrame({"env_id": ["e1", "e2", "e3"], "author": ["a", "b", "b"], "domain": "search",
                         "family": "grid", "source": ["x = 1\n", "def f():\n    return 2\n", "y = [1, 2]\n"]})
    table, clusters = design_convergence(envs, n_perm=5)
    assert list(DOCS["design_convergence"]) == list(table.columns)
    assert list(DOCS["design_convergence_clusters"]) == list(clusters.columns)
    assert list(DOCS["authoring_progress"]) == PROGRESS
    assert list(DOCS["lift_learning"]) == LEARNING
    assert list(DOCS["author_value_mix"]) == MIX_COLUMNS


def test_describe_names_a_documented_column_and_nothing_else():
    assert describe("episodes", "seed").startswith("The environment seed")
    assert describe("episodes", "no_such_column") is None and describe("no_such_table", "seed") is None


def test_rankings_and_its_summary_are_documented_column_for_column():
    """The leaderboard's documented columns are the table's (and no more: the catalog listed 39 columns that never
    existed, such as design_rank), plus the provenance of the published snapshot."""
    import numpy as np

    from envduels_dagster.core.rankings.leaderboard import RankingConfig, compute_rankings
    from tests.helpers.synthetic_stats import panel_stats

    stats = panel_stats(np.random.default_rng(4), {"a": 0.8, "b": 0.5, "c": 0.3})
    duels = pd.DataFrame({"model_a": ["a", "a", "b"], "model_b": ["b", "c", "c"], "outcome": ["a", "a", "tie"],
                          "score_a": [1.0, 1.0, 0.5], "lift_diff": [0.4, 0.3, 0.01], "lift_diff_se": [0.1, 0.1, 0.1],
                          "diff_df": [10.0, 10.0, 10.0]})
    table, summary = compute_rankings(stats, duels, RankingConfig(n_boot=20, n_perm=20), skill_rank={"a": 1, "b": 2, "c": 3})
    assert set(DOCS["rankings"]) - PUBLISHED == set(table.columns)
    assert set(DOCS["rankings_summary"]) == set(summary.columns)
