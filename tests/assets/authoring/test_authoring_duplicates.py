"""Issue 31 through the authoring asset: a provider that repeats itself yields one environment and "duplicate
of" rejections in the warehouse, each row with its prompt version; bad authoring settings write nothing."""

from __future__ import annotations

import dagster as dg
import duckdb

from envduels_dagster.assets.authoring.assets import authored_environments
from envduels_dagster.assets.registry.partitions import register_models
from tests.helpers.fixed_provider import SEEDS, http_registry, provider, real_reply
from tests.helpers.pipeline import pipeline_resources


def test_a_provider_returning_the_same_reply_for_every_slot_yields_one_environment(tmp_path):
    """Through the authoring asset into the warehouse: one valid environment, N-1 "duplicate of" rejections
    (not valid, so never played and not in n_envs), each row with its prompt version."""
    with provider(lambda user: real_reply(4)) as (base, bodies):
        resources = pipeline_resources(tmp_path, http_registry(tmp_path, base, "fixed"), envs_per_author=4,
                                       seeds=SEEDS)
        instance = dg.DagsterInstance.ephemeral()
        register_models(instance, ["fixed"])
        result = dg.materialize([authored_environments], instance=instance, resources=resources,
                                partition_key="fixed")
    assert result.success and len(bodies) == 4
    meta = result.asset_materializations_for_node("authored_environments")[0].metadata
    assert (meta["valid"].value, meta["duplicates"].value, meta["num_rows"].value) == (1, 3, 4)
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as conn:
        rows = conn.execute("SELECT env_id, valid, reject_reason, prompt_version FROM environments "
                            "WHERE author = 'fixed' ORDER BY env_id").fetchall()
        last_column = conn.execute("SELECT column_name FROM information_schema.columns WHERE table_name = "
                                   "'environments' ORDER BY ordinal_position DESC LIMIT 1").fetchone()[0]
    assert last_column == "prompt_version"
    first = rows[0][0]
    assert rows[0][1:] == (True, None, "author-v3")
    assert [r[1:] for r in rows[1:]] == [(False, f"duplicate of {first} (AST similarity 1.00)", "author-v3")] * 3


def test_bad_settings_given_to_the_asset_fail_before_any_call_and_write_nothing(tmp_path):
    with provider(lambda user: real_reply(4)) as (base, bodies):
        resources = pipeline_resources(tmp_path, http_registry(tmp_path, base, "fixed"), envs_per_author=2,
                                       seeds=SEEDS, author_wave_size=0)
        instance = dg.DagsterInstance.ephemeral()
        register_models(instance, ["fixed"])
        result = dg.materialize([authored_environments], instance=instance, resources=resources,
                                partition_key="fixed", raise_on_error=False)
    assert not result.success and bodies == []
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert ("authoring settings cannot be used, nothing was written: wave size 0: a whole number of slots from 1 "
            "to 1000 is needed") in str(failure.event_specific_data.error.message)
    assert not (tmp_path / "warehouse.duckdb").exists()
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
