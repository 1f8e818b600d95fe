"""Adaptive seed sampling: stops when the verdict is settled, spends seeds on borderline pairs, never
contradicts the data it played, and is off by default."""

from __future__ import annotations

import asyncio
import inspect
import random

import pandas as pd
import pytest

from envduels_dagster.core.play.adaptive import (
    AdaptivePolicy,
    category,
    is_member,
    next_step,
    play_pair_adaptive,
    settled_probability,
)
from envduels_dagster.core.play.episode import PlayConfig
from envduels_dagster.core.stats import env_solver_stats, training_candidates
from tests.helpers.adaptive_play import run


def test_a_cold_success_settles_wasted_after_one_seed():
    records, decision, asked = run({0: ("success", "success")})
    assert asked == [0] and len(records) == 2
    assert decision.category == "wasted" and not decision.member


def test_failing_both_conditions_stops_early_as_noise():
    _, decision, asked = run({})
    assert 1 <= len(asked) < 4
    assert decision.category == "noise" and not decision.member


def test_a_learnable_environment_is_confirmed_on_every_base_seed():
    _, decision, asked = run({s: ("failure", "success") for s in range(8)})
    assert asked == [0, 1, 2, 3]  # membership needs every cold seed failed: no shortcut
    assert decision.member and decision.category == "learnable"


def test_borderline_pairs_get_extra_seeds_up_to_the_cap():
    # cold 0/4, hinted 2/4: right at the threshold -> more seeds, at most max_seeds
    outcomes = {0: ("failure", "success"), 1: ("failure", "failure"), 2: ("failure", "success"),
                3: ("failure", "failure")}
    policy = AdaptivePolicy(max_seeds=7)
    _, decision, asked = run(outcomes, policy)
    assert asked[:4] == [0, 1, 2, 3] and 4 < len(asked) <= 7
    assert asked == list(range(len(asked)))  # new seeds follow the benchmark seeds
    assert decision.member == is_member(decision.cold, decision.hint, decision.n)


def test_incomplete_seeds_count_for_nothing_and_are_replaced():
    outcomes = {0: ("incomplete", "success"), 1: ("success", "failure")}
    _, decision, asked = run(outcomes)
    assert asked == [0, 1] and decision.incomplete_seeds == 1 and decision.n == 1
    assert decision.category == "wasted"


def test_never_more_than_max_seeds_even_when_everything_is_incomplete():
    _, decision, asked = run({s: ("incomplete", "incomplete") for s in range(20)}, AdaptivePolicy(max_seeds=6))
    assert len(asked) == 6 and decision.n == 0 and not decision.member


def test_higher_confidence_never_plays_fewer_seeds():
    rng = random.Random(3)
    for _ in range(200):
        outcomes = {s: (rng.choice(["success", "failure", "failure"]), rng.choice(["success", "failure"]))
                    for s in range(8)}
        low = len(run(outcomes, AdaptivePolicy(confidence=0.8))[2])
        high = len(run(outcomes, AdaptivePolicy(confidence=0.97))[2])
        assert high >= low


@pytest.mark.parametrize("target", ["membership", "category"])
def test_decisions_match_the_pipeline_statistics_on_the_seeds_played(target):
    """What the policy settles on is what env_solver_stats / training_candidates compute downstream."""
    policy = AdaptivePolicy(target=target)
    rng = random.Random(11)
    rows, decisions = [], {}
    for k in range(150):
        p_cold, p_hint = rng.random() * 0.6, rng.random()
        outcomes = {s: ("success" if rng.random() < p_cold else "failure",
                        "success" if rng.random() < p_hint else "failure") for s in range(8)}
        records, decision, asked = run(outcomes, policy)
        env_id = f"e{k}"
        decisions[env_id] = decision
        for seed, cold, hint in zip(asked, records[::2], records[1::2]):
            rows += [{"env_id": env_id, "author": "a", "solver": "s", "seed": seed, "condition": c, "status": r.status}
                     for c, r in (("cold", cold), ("hinted", hint))]
    stats = env_solver_stats(pd.DataFrame(rows)).set_index("env_id")
    members = set(training_candidates(stats.reset_index(), "s")["env_id"])
    for env_id, decision in decisions.items():
        assert stats.loc[env_id, "category"] == decision.category
        assert (env_id in members) == decision.member


def test_settled_probability_is_a_probability_and_certain_at_the_horizon():
    policy = AdaptivePolicy()
    for cold, hint, n in [(0, 0, 1), (0, 1, 1), (1, 0, 1), (0, 2, 3), (0, 0, 3)]:
        p = settled_probability(cold, hint, n, 4, policy)
        assert 0.0 <= p <= 1.0 + 1e-9
        assert settled_probability(cold, hint, n, n, policy) == 1.0
    assert settled_probability(1, 0, 1, 4, policy) == pytest.approx(1.0)  # a cold success cannot be undone
    assert next_step(0, 0, 0, policy)  # nothing played yet


def test_policy_rejects_inconsistent_settings():
    with pytest.raises(ValueError):
        AdaptivePolicy(min_seeds=5, base_seeds=4)
    with pytest.raises(ValueError):
        AdaptivePolicy(confidence=1.0)


def test_play_pair_adaptive_plays_real_environments_paired_and_in_order(sim_registry, tmp_path):
    from envduels_dagster.core.authoring.prompts import author_environments
    from envduels_dagster.core.models import Gateway
    from envduels_dagster.core.models.registry import load_registry

    gateway = Gateway(load_registry(sim_registry(["journeyman", "oracle"])))
    policy = AdaptivePolicy(max_seeds=6)

    async def go():
        envs = await author_environments(gateway, "journeyman", 2, [0, 1, 2, 3])
        return envs, await play_pair_adaptive(gateway, "oracle", envs, policy, PlayConfig(concurrency=4))

    envs, (records, decisions) = asyncio.run(go())
    valid = [e for e in envs if e.valid]
    assert valid and len(decisions) == len(valid)
    for env, decision in zip(valid, decisions):
        mine = [r for r in records if r.env_id == env.env_id]
        assert [r.seed for r in mine] == [s for s in decision.seeds_played for _ in range(2)]
        assert [r.condition for r in mine] == ["cold", "hinted"] * len(decision.seeds_played)
        assert 1 <= len(decision.seeds_played) <= 6
        assert decision.category == category(decision.cold, decision.hint)


def test_adaptive_sampling_is_off_by_default():
    from envduels_dagster.resources import DuelSettings

    assert DuelSettings().adaptive_sampling is False


def test_duel_episodes_with_adaptive_sampling_writes_consistent_pairs(tmp_path, sim_registry):
    """Through Dagster: the opt-in setting plays fewer episodes, still paired, and says so in the metadata."""
    import dagster as dg
    import duckdb

    from envduels_dagster.assets.authoring.assets import authored_environments
    from envduels_dagster.assets.duels.assets import duel_episodes
    from envduels_dagster.assets.registry.partitions import pair_key, register_models
    from tests.helpers.pipeline import pipeline_resources

    registry = sim_registry(["journeyman", "oracle"])
    resources = pipeline_resources(tmp_path, registry, envs_per_author=2, seeds=(0, 1, 2, 3),
                                   adaptive_sampling=True, adaptive_max_seeds=6)
    instance = dg.DagsterInstance.ephemeral()
    register_models(instance, ["journeyman", "oracle"])
    assert dg.materialize([authored_environments], instance=instance, resources=resources,
                          partition_key="journeyman").success
    result = dg.materialize([duel_episodes], instance=instance, resources=resources,
                            partition_key=pair_key("journeyman", "oracle"))
    assert result.success
    md = result.asset_materializations_for_node("duel_episodes")[0].metadata
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as conn:
        rows = conn.execute("""SELECT env_id, seed, list_sort(list(condition)) FROM episodes
                               GROUP BY env_id, seed ORDER BY env_id, seed""").fetchall()
    assert rows and all(conds == ["cold", "hinted"] for *_, conds in rows)
    assert md["adaptive_seeds_played"].value == len(rows)
    assert md["num_rows"].value == 2 * len(rows)


# ---- the episode runner's speed options (docs/BENCHMARKS.md): same episodes, less work ----------------------

PLAYED = ("env_id", "solver", "condition", "seed", "status", "stop_reason", "turns", "format_errors",
          "final_reward", "prompt_tokens", "completion_tokens", "model_calls", "transcript")


def _envs_and_gateway(sim_registry, names=("journeyman", "apprentice")):
    from envduels_dagster.core.authoring.prompts import author_environments
    from envduels_dagster.core.models import Gateway
    from envduels_dagster.core.models.registry import load_registry

    gateway = Gateway(load_registry(sim_registry(list(names))))
    envs = asyncio.run(author_environments(gateway, "journeyman", 2, [0, 1, 2, 3]))
    assert any(e.valid for e in envs)
    return gateway, envs


def test_sandbox_reuse_is_gone_and_a_run_config_that_asks_for_it_is_refused_by_name():
    """Sandbox reuse was removed (docs/DECISIONS.md, "Sandbox reuse removed"): every episode gets its own worker,
    and a run config still setting ``reuse_sandboxes`` is refused before anything runs, naming the field."""
    import dagster as dg

    from envduels_dagster.core.play.episode import play_pair
    from envduels_dagster.resources import DuelSettings

    assert "reuse_sandboxes" not in DuelSettings.model_fields
    assert "reuse_sandboxes" not in inspect.signature(play_pair).parameters
    ran = []

    @dg.asset(required_resource_keys={"settings"})
    def probe(context) -> None:
        ran.append(context.resources.settings.episode_concurrency)

    with pytest.raises(dg.DagsterInvalidConfigError, match="reuse_sandboxes"):
        dg.materialize([probe], resources={"settings": DuelSettings()},
                       run_config={"resources": {"settings": {"config": {"reuse_sandboxes": True}}}})
    assert ran == []


@pytest.mark.slow
def test_litellm_worker_processes_give_the_in_process_episodes(sim_registry, tmp_path, monkeypatch):
    """Gateway(litellm_processes=1): litellm runs in a child process; episodes, retries and errors are the same."""
    from envduels_dagster.core.models import Gateway, LLMError
    from envduels_dagster.core.models.registry import load_registry
    from envduels_dagster.core.play.episode import PlayConfig, play_pair
    from tests.helpers.sim_server import SimServerProcess

    server = SimServerProcess("--fault-rate", "0.2", "--seed", "3", "--timeout-fault-s", "2")
    try:
        _, envs = _envs_and_gateway(sim_registry)
        registry = tmp_path / "http.yaml"
        registry.write_text(f"""models:
  - name: apprentice
    model: envduels-sim/apprentice
  - name: apprentice-http
    model: openai/apprentice
    api_base: {server.base}
    client: litellm-full
    request_contract: true
  - name: unreachable
    model: openai/apprentice
    api_base: http://127.0.0.1:9/v1
    client: litellm-full
""")
        from envduels_dagster.core.models import RetryPolicy

        policy = RetryPolicy(max_attempts=8, base_delay_s=0.05, timeout_s=1.0, max_timeouts=8, deadline_factor=8)
        gateway = Gateway(load_registry(registry), policy=policy, litellm_processes=1)

        async def go():
            try:
                local = await play_pair(gateway, "apprentice", envs, PlayConfig(concurrency=4))
                remote = await play_pair(gateway, "apprentice-http", envs, PlayConfig(concurrency=4))
                with pytest.raises(LLMError) as failed:
                    await gateway.chat("unreachable", [{"role": "user", "content": "x"}])
                return local, remote, failed.value
            finally:
                await gateway.aclose()

        local, remote, error = asyncio.run(go())
        same = set(PLAYED) - {"solver"}
        assert [r.model_dump(include=same) for r in remote] == [r.model_dump(include=same) for r in local]
        assert sum(r.retries for r in remote) > 0  # faults were retried, in the parent's loop
        assert error.error_class == "connection_error" and error.attempts == 8
    finally:
        server.stop()
