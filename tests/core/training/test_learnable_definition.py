"""One definition of "learnable" (issue 42): the answer (``author_value``) and the training set count the same thing.

Before, the answer counted a seed as learnable when the learner failed it cold and passed it hinted (a per-seed
rate) while the training set admitted an environment by the posterior probability that its true rates are in the
learnable region; a 3-author x 1-learner simulated registry reported "0.3 learnable environments per environment
written" beside 0 admitted rows. Now ``expected_learnable`` of an author is the sum of the training set's
``p_learnable`` over that author's environments (``core.stats.learnable``), admitted or not: held here on a real
Dagster run of simulated models (3 authors x 1 learner, 4 environments x 4 seeds)."""

from __future__ import annotations

import dagster as dg
import duckdb
import pandas as pd
import pytest

from envduels_dagster.cli.demo import materialize_all
from envduels_dagster.core.training.training_set import TrainingRule, build_training_set
from tests.helpers.pipeline import THREE_AUTHORS_ONE_LEARNER, pipeline_resources, write_roles


@pytest.mark.slow
def test_the_answer_counts_the_training_sets_learnable_probability_per_author(tmp_path, monkeypatch):
    registry = write_roles(tmp_path / "models.yaml", THREE_AUTHORS_ONE_LEARNER)
    monkeypatch.setenv("ENVDUELS_REGISTRY", str(registry))
    monkeypatch.setenv("ENVDUELS_ROUNDS", "0")  # round 0 is the case; a hardening round only adds time
    resources = pipeline_resources(tmp_path, registry, envs_per_author=4, seeds=(0, 1, 2, 3))
    materialize_all(dg.DagsterInstance.ephemeral(), resources, log=lambda _m: None)

    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as conn:
        value = conn.execute("SELECT author, expected_learnable, n_envs FROM author_value WHERE learner = 'novice' "
                             "AND NOT is_self").df().set_index("author")
        admitted = conn.execute("SELECT author, env_id, p_learnable FROM training_set WHERE learner = 'novice'").df()
        envs = conn.execute("SELECT * FROM environments").df()
        episodes = conn.execute("SELECT env_id, author, solver, round, condition, seed, status FROM episodes").df()
    built = build_training_set("novice", episodes, envs, TrainingRule())
    parts = [f[["author", "env_id", "p_learnable"]] for f in (built.rows, built.excluded) if len(f)]
    candidates = pd.concat(parts) if parts else built.rows[["author", "env_id", "p_learnable"]]
    assert sorted(value.index) == ["expert", "journeyman", "oracle"] and (value["n_envs"] >= 4).all()
    assert set(admitted["env_id"]) == set(built.rows["env_id"])  # the table is the rebuilt set
    for author, row in value.iterrows():
        mine = candidates[candidates["author"] == author]
        # the answer's count IS the training set's probability, summed over the author's environments
        assert row["expected_learnable"] == pytest.approx(float(mine["p_learnable"].sum()), abs=1e-9), author
        # so an author's admitted rows are part of its count (each admitted row carries P >= the threshold)
        rows = admitted[admitted["author"] == author]
        assert row["expected_learnable"] >= float(rows["p_learnable"].sum()) - 1e-9
        assert (rows["p_learnable"] >= TrainingRule().threshold - 1e-12).all()
