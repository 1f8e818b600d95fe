"""Co-evolution rounds: lineage, validation, bounded and scrubbed digests, incremental re-runs."""

from __future__ import annotations

import json

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest

from envduels_dagster.assets.authoring.assets import authored_environments
from envduels_dagster.assets.duels.assets import duel_episodes
from envduels_dagster.assets.registry.partitions import pair_key, register_models
from envduels_dagster.assets.rounds.assets import round_assets
from envduels_dagster.core.authoring.coevolution import REDACTED, build_digest_messages
from envduels_dagster.core.protocol import EnvironmentSpec
from envduels_dagster.core.rankings.progress import paired_change, progress_table
from envduels_dagster.core.stats import discrimination, spearman_with_permutation
from tests.helpers.pipeline import pipeline_resources, write_registry

pytestmark = pytest.mark.slow  # real pipeline runs: outside the `-m 'not slow'` loop

MODELS = ["expert", "journeyman", "novice"]


@pytest.fixture(scope="module")
def two_rounds(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rounds")
    resources = pipeline_resources(tmp, write_registry(tmp / "models.yaml", MODELS), envs_per_author=2, seeds=(0, 1))
    instance = dg.DagsterInstance.ephemeral()
    register_models(instance, MODELS)
    hardened, pairs_r1 = round_assets(duel_episodes, rounds=1)

    def run(asset, key):
        result = dg.materialize([asset], instance=instance, resources=resources, partition_key=key)
        assert result.success
        return result.asset_materializations_for_node(asset.key.to_user_string())[0].metadata

    for asset, pairs in ((authored_environments, duel_episodes), (hardened, pairs_r1)):
        for m in MODELS:
            run(asset, m)
        for a in MODELS:
            for s in MODELS:
                run(pairs, pair_key(a, s))
    return tmp / "warehouse.duckdb", run, hardened, pairs_r1


def rows(db, sql):
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def test_round_one_environments_link_to_their_parents_and_are_validated(two_rounds):
    db, *_ = two_rounds
    children = rows(db, """SELECT c.env_id, c.author, p.author, p.round, c.valid, c.reject_reason, c.source, c.author_meta
                           FROM environments c JOIN environments p ON c.parent_env_id = p.env_id
                           WHERE c.round = 1""")
    assert len(children) == len(rows(db, "SELECT * FROM environments WHERE round = 0")) == 6
    for env_id, author, parent_author, parent_round, valid, reason, source, meta in children:
        assert env_id.startswith(f"{author}.r1.") and parent_author == author and parent_round == 0
        assert valid == (reason is None)
        if not json.loads(meta).get("keep"):
            assert "class " in source  # a rewritten environment went through parsing and validation
    assert rows(db, "SELECT count(DISTINCT round) FROM episodes")[0][0] == 2


def test_rerunning_round_one_costs_no_model_calls_and_leaves_round_zero_alone(two_rounds):
    db, run, hardened, pairs_r1 = two_rounds
    before = rows(db, "SELECT env_id, solver, condition, seed, materialized_at FROM episodes WHERE round = 0 ORDER BY ALL")
    md = run(hardened, "novice")
    assert md["model_calls"].value == 0
    md = run(pairs_r1, pair_key("novice", "expert"))
    assert md["model_calls"].value == 0 and md["cache_hits"].value > 0
    after = rows(db, "SELECT env_id, solver, condition, seed, materialized_at FROM episodes WHERE round = 0 ORDER BY ALL")
    assert after == before


def transcript(*contents):
    return json.dumps([{"role": "system", "content": "s"}, *({"role": r, "content": c} for r, c in contents)])


def test_digest_is_bounded_and_never_carries_another_authors_hint():
    parent = EnvironmentSpec(env_id="a.r0.0.x", author="a", class_name="G", max_turns=3, source="class G: pass",
                             hint="my own hint", valid=True, benchmark_seeds=[0, 1])
    secret = "The secret is always a multiple of 7."
    long_obs = "wrong " * 200
    episodes = pd.DataFrame([
        {"env_id": parent.env_id, "solver": s, "condition": c, "seed": seed, "status": "failure",
         "transcript": transcript(("user", "Observation: x"), ("assistant", f"I recall: {secret}"),
                                  ("user", long_obs))}
        for s in ("b", "c") for c in ("cold", "hinted") for seed in (0, 1)])
    messages = build_digest_messages(parent, episodes, 1, 0, budget=400, forbidden_hints=[secret, "other"])
    text = messages[-1]["content"]
    assert secret not in text and REDACTED in text
    excerpt = text.split("Where they failed (excerpts, 400 characters at most):\n")[1].split("\n\nGoal:")[0]
    assert 0 < len(excerpt) <= 400
    assert "- b: cold 0.00, hinted 0.00" in text and "my own hint" in text


def test_score_helpers_on_hand_computed_cases():
    assert discrimination([1.0, 0.0, 1.0, 0.0]) == pytest.approx(1.0)  # split panel: |1-0| x 4 pairs / floor(16/4)
    assert discrimination([0.5, 0.5, 0.5]) == 0.0
    est, lo, hi, reason = paired_change(np.array([0.2, 0.2, 0.2]), (-1.0, 1.0))  # no spread: no interval
    assert est == pytest.approx(0.2) and np.isnan(lo) and np.isnan(hi) and reason.startswith("insufficient data")
    est, lo, hi, reason = paired_change(np.array([0.1, 0.2, 0.3]), (-1.0, 1.0))  # t on 2 df: 0.2 +- 4.303 * 0.0577
    assert (est, lo, hi) == pytest.approx((0.2, 0.2 - 0.2484, 0.2 + 0.2484), abs=1e-4) and reason is None
    rho, p = spearman_with_permutation(np.array([1.0, 2, 3, 4, 5]), np.array([2.0, 4, 6, 8, 10]), n_perm=2000)
    assert rho == pytest.approx(1.0) and p < 0.05
    empty = pd.DataFrame({"x": []}, dtype=object)["x"].to_numpy()  # no hardening round: nothing to correlate
    assert all(v != v for v in spearman_with_permutation(empty, empty))


def test_progress_table_pairs_children_with_parents(two_rounds):
    db, *_ = two_rounds
    with duckdb.connect(str(db), read_only=True) as conn:
        envs, episodes = conn.execute("SELECT * FROM environments").df(), conn.execute("SELECT * FROM episodes").df()
    table = progress_table(envs, episodes)
    assert set(table["author"]) <= set(MODELS) and (table["round"] == 1).all()
    for row in table.itertuples():  # a t interval over the author's lineage pairs, or NULL with the reason
        assert (row.design_change_lower <= row.design_change_upper) or isinstance(row.design_change_reason, str)
        assert row.hint_change == pytest.approx(row.hint_after - row.hint_before)


def test_training_set_takes_the_newest_valid_version_of_each_lineage(two_rounds):
    db, run, *_ = two_rounds
    from envduels_dagster.assets.training.assets import training_set

    run(training_set, "novice")
    picked = {e for (e,) in rows(db, "SELECT env_id FROM training_set WHERE learner = 'novice'")}
    superseded = {p for (p,) in rows(db, "SELECT parent_env_id FROM environments WHERE round = 1 AND valid")}
    assert superseded and not picked & superseded
