"""Data checks (issue 5): great-expectations suites run as Dagster asset checks.

Most tests build a small, consistent warehouse by hand (two models, three
environments, sixteen episodes), inject the bad data a check guards against, and
call the check's evaluation on it: real DuckDB, real great-expectations, no mocks.
The blocking training-set checks run through a real ``dg.materialize`` with a
downstream asset that must not run. One module-scoped simulated pipeline (two
models, one environment per author, two seeds) shows every check passing on a
clean run, a check learning its partition, and the real training_set publishing.
"""

import json
import shutil
from pathlib import Path

import dagster as dg
import duckdb
import pandas as pd
import pytest
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.authoring.checks import evaluate_environments
from envduels_dagster.assets.duels.checks import evaluate_episodes
from envduels_dagster.assets.marts.checks import evaluate_pair_lift
from envduels_dagster.assets.registry.checks import evaluate_model_registry
from envduels_dagster.assets.registry.partitions import register_models
from envduels_dagster.assets.training.checks import evaluate_training_set, training_set_checks
from envduels_dagster.core.models.registry import dump_entry, load_registry
from envduels_dagster.core.protocol import sha256_text
from envduels_dagster.core.stats import pair_lift
from envduels_dagster.core.storage.warehouse import ensure_schema
from envduels_dagster.core.training.training_set import TrainingRule
from envduels_dagster.definitions import build_definitions
from envduels_dagster.resources import DuelSettings
from envduels_dagster.resources.io_managers import PUBLISHED_IO_MANAGER_KEY, PublishedTableIOManager
from tests.helpers.pipeline import pipeline_resources, write_registry

pytestmark = pytest.mark.slow  # real pipeline runs: outside the `-m 'not slow'` loop

# ---------------------------------------------------------------------------------------------
# A hand-built warehouse: models alice (oracle) and bob (novice).
#   alice.r0.0 (valid): bob fails cold, passes hinted  -> learnable for bob (in bob's training set)
#   bob.r0.0   (valid): alice passes cold (wasted); bob fails cold, passes hinted (self: excluded);
#                       alice's hinted seed 1 hit a rate limit -> incomplete (llm_error)
#   bob.r0.1   (rejected, with its reason)
# ---------------------------------------------------------------------------------------------

SEEDS = [0, 1]
SOURCE = "class Game{n}:\n    def __init__(self, max_turns=6):\n        self.max_turns = max_turns\n"


def _env(env_id: str, author: str, n: int, valid: bool, reason: str | None = None) -> dict:
    source = SOURCE.format(n=n)
    return {"env_id": env_id, "author": author, "round": 0, "domain": "deduction", "family": "lock",
            "class_name": f"Game{n}", "max_turns": 6, "source": source, "source_sha256": sha256_text(source),
            "hint": "Try the digits in order." if valid else "", "benchmark_seeds": SEEDS, "valid": valid,
            "reject_reason": reason, "winnability": "proven" if valid else "failed", "parent_env_id": None,
            "author_version": "1", "materialized_at": pd.Timestamp("2025-01-01")}


def _episode(env_id: str, author: str, solver: str, condition: str, seed: int, outcome: str) -> dict:
    status, stop, turns, reward, error = {
        "success": ("success", "terminated", 3, 1.0, None),
        "failure": ("failure", "max_turns", 6, 0.0, None),
        "incomplete": ("incomplete", "llm_error", 1, 0.0, "RateLimitError: HTTP 429 after 5 attempts"),
    }[outcome]
    transcript = [{"role": "system", "content": "You are playing an interactive language game."},
                  {"role": "user", "content": f"Observation: lock {seed}"},
                  {"role": "assistant", "content": "My move: 123.\n\\boxed{123}"}]
    return {"env_id": env_id, "author": author, "solver": solver, "round": 0, "condition": condition, "seed": seed,
            "status": status, "stop_reason": stop, "turns": turns, "max_turns": 6, "format_errors": 0,
            "final_reward": reward, "prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.0, "latency_s": 0.01,
            "model_calls": turns, "cached_calls": 0, "error": error, "transcript": json.dumps(transcript),
            "is_self_pair": author == solver, "solver_version": "1", "materialized_at": pd.Timestamp("2025-01-01")}


def _episodes() -> pd.DataFrame:
    plan = {  # (env, solver) -> outcome per (condition, seed)
        ("alice.r0.0", "alice"): {"cold": ["success", "success"], "hinted": ["success", "success"]},
        ("alice.r0.0", "bob"): {"cold": ["failure", "failure"], "hinted": ["success", "success"]},
        ("bob.r0.0", "alice"): {"cold": ["success", "success"], "hinted": ["success", "incomplete"]},
        ("bob.r0.0", "bob"): {"cold": ["failure", "failure"], "hinted": ["success", "success"]},
    }
    rows = [_episode(env, env.split(".")[0], solver, cond, seed, outcome)
            for (env, solver), by_cond in plan.items() for cond, outcomes in by_cond.items()
            for seed, outcome in zip(SEEDS, outcomes)]
    return pd.DataFrame(rows)


def _insert(conn, table: str, df: pd.DataFrame) -> None:
    conn.register("_rows", df)
    conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _rows")
    conn.unregister("_rows")


def build_warehouse(path: Path, registry: Path) -> None:
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
        _insert(conn, "model_registry", pd.DataFrame([dump_entry(m) for m in load_registry(registry).models]))
        envs = pd.DataFrame([_env("alice.r0.0", "alice", 0, True), _env("bob.r0.0", "bob", 1, True),
                             _env("bob.r0.1", "bob", 2, False, "reference solution did not win seed 0")])
        _insert(conn, "environments", envs)
        episodes = _episodes()
        _insert(conn, "episodes", episodes)
        _insert(conn, "pair_lift", pair_lift(episodes))
        env = envs.iloc[0]
        _insert(conn, "training_set", pd.DataFrame([{
            "learner": "bob", "env_id": "alice.r0.0", "author": "alice", "domain": env["domain"],
            "class_name": env["class_name"], "max_turns": 6, "source_sha256": env["source_sha256"],
            "hint": env["hint"], "benchmark_seeds": SEEDS, "n_seeds": 2, "p_cold": 0.0, "p_hint": 1.0,
            "lift": 1.0, "lift_lower": HAND_LIFT[0], "lift_upper": HAND_LIFT[1], "rank": 1, "p_learnable": HAND_P_LEARNABLE,
            "admission_method": "rule", "admission_threshold": None, "cold_ceiling": 0.25, "prior_rows": 2}]))


# bob on alice.r0.0 (0/2 cold, 2/2 hinted) under the joint prior fitted on the two peer rows
# (alice on bob.r0.0: 1/1 cold, 1/1 hinted on its one matched seed): the value the probability checks re-derive.
def _hand_p_learnable() -> float:
    from envduels_dagster.core.stats import joint_admission as ja

    prior = ja.fit_joint_prior([0, 1], [2, 1], [2, 1])
    return float(ja.joint_learnable_probability(prior, [0], [2], [2])[0])


def _hand_lift_interval() -> tuple[float, float]:
    from envduels_dagster.core.stats import joint_admission as ja

    lower, upper = ja.robust_lift_interval(ja.fit_joint_prior([0, 1], [2, 1], [2, 1]), [0], [2], [2])
    return float(lower[0]), float(upper[0])


HAND_P_LEARNABLE = _hand_p_learnable()
HAND_LIFT = _hand_lift_interval()


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("handbuilt")
    registry = write_registry(root / "models.yaml", [])
    registry.write_text("models:\n  - name: alice\n    model: envduels-sim/oracle\n"
                        "  - name: bob\n    model: envduels-sim/novice\n")
    build_warehouse(root / "warehouse.duckdb", registry)
    return root / "warehouse.duckdb", registry


@pytest.fixture
def wh(template, tmp_path):
    """A private copy of the clean hand-built warehouse, as an open connection."""
    path = tmp_path / "warehouse.duckdb"
    shutil.copy(template[0], path)
    conn = duckdb.connect(str(path))
    yield conn
    conn.close()


def file_models(registry: Path) -> list[dict]:
    return [{"name": m.name, "model": m.model, "version": m.version} for m in load_registry(registry).models]


def run_suite(conn, suite: str, template=None, **kw) -> dict[str, dg.AssetCheckResult]:
    if suite == "registry":
        results = evaluate_model_registry(conn, file_models(template[1]))
    elif suite == "environments":
        results = evaluate_environments(conn, kw.get("author", "bob"))
    elif suite == "episodes":
        results = evaluate_episodes(conn, kw.get("author", "alice"), kw.get("solver", "bob"))
    elif suite == "pair_lift":
        results = evaluate_pair_lift(conn, min_matched=kw.get("min_matched", 1))
    else:
        rule = TrainingRule(include_self_authored=kw.get("include_self", False), method=kw.get("method", "rule"),
                            threshold=kw.get("threshold", 0.5))
        results = evaluate_training_set(conn, kw.get("learner", "bob"), rule)
    return {r.check_name: r for r in results}


def failing(results: dict[str, dg.AssetCheckResult]) -> set[str]:
    return {name for name, r in results.items() if not r.passed}


def test_clean_handbuilt_warehouse_passes_every_check(wh, template):
    for suite, kw in [("registry", {}), ("environments", {"author": "alice"}), ("environments", {"author": "bob"}),
                      *[("episodes", {"author": a, "solver": s}) for a in ("alice", "bob") for s in ("alice", "bob")],
                      ("pair_lift", {}), ("training", {"learner": "bob"}), ("training", {"learner": "alice"}),
                      ("training", {"learner": "bob", "method": "probability", "threshold": 0.1})]:
        results = run_suite(wh, suite, template, **kw)
        assert not failing(results), (suite, kw, {n: r.description for n, r in results.items() if not r.passed})
    # metadata reads well: statistics, an expectation table, the suite and the partition
    md = run_suite(wh, "episodes", template)["conditions_paired"].metadata
    assert md["statistics"].value["unsuccessful_expectations"] == 0
    assert "expect_compound_columns_to_be_unique" in md["expectations"].value
    assert "great_expectations 1." in md["suite"].value and md["partition"].value == "alice|bob"


# (suite, target check, SQL injecting the bad data, message the failure must carry, suite kwargs)
CORRUPTIONS = [
    ("registry", "matches_registry_file", "DELETE FROM model_registry WHERE name = 'bob'",
     "every model of the registry file has a row: 1 of 2 rows violate it, e.g. [name=bob", {}),
    ("registry", "matches_registry_file", "UPDATE model_registry SET version = '7' WHERE name = 'bob'",
     "version matches the registry file: 1 of 2 rows violate it", {}),
    ("environments", "env_ids_unique", "INSERT INTO environments SELECT * FROM environments WHERE env_id = 'bob.r0.0'",
     "env_id is unique within the author's environments: 2 of 3 rows violate it, e.g. [env_id=bob.r0.0]", {}),
    ("environments", "env_ids_unique", "UPDATE environments SET env_id = 'bob.r0.0' WHERE env_id = 'alice.r0.0'",
     "env_id appears exactly once in the warehouse", {}),
    ("environments", "source_sha256_matches_source",
     "UPDATE environments SET source = source || '# edited after hashing' WHERE env_id = 'bob.r0.0'",
     "source_sha256 equals sha256(source): 1 of 2 rows violate it, e.g. [env_id=bob.r0.0", {}),
    ("environments", "valid_envs_have_hint", "UPDATE environments SET hint = '   ' WHERE env_id = 'bob.r0.0'",
     "valid environments have a non-empty hint: 1 of 1 rows violate it, e.g. [env_id=bob.r0.0, hint_chars=0]", {}),
    ("environments", "rejected_envs_have_reason", "UPDATE environments SET reject_reason = NULL WHERE NOT valid",
     "rejected environments state a reject_reason: 1 of 1 rows violate it, e.g. [env_id=bob.r0.1", {}),
    ("environments", "max_turns_in_range", "UPDATE environments SET max_turns = 500 WHERE env_id = 'bob.r0.1'",
     "max_turns is within 1..200: 1 of 2 rows violate it, e.g. [env_id=bob.r0.1, max_turns=500]", {}),
    ("episodes", "values_in_allowed_sets",
     "UPDATE episodes SET status = 'won' WHERE solver = 'bob' AND author = 'alice' AND seed = 0 AND condition = 'cold'",
     "status is one of success, failure, incomplete: 1 of 4 rows violate it, "
     "e.g. [env_id=alice.r0.0, seed=0, condition=cold, status=won]", {}),
    ("episodes", "success_requires_terminal_stop",
     "UPDATE episodes SET stop_reason = 'truncated' WHERE solver = 'bob' AND author = 'alice' AND seed = 1 "
     "AND condition = 'hinted'",
     "successful episodes end with stop_reason 'terminated': 1 of 2 rows violate it, "
     "e.g. [env_id=alice.r0.0, seed=1, condition=hinted, stop_reason=truncated]", {}),
    ("episodes", "turns_within_max_turns",
     "UPDATE episodes SET turns = 9 WHERE solver = 'bob' AND author = 'alice' AND seed = 0 AND condition = 'cold'",
     "turns <= max_turns: 1 of 4 rows violate it, e.g. [env_id=alice.r0.0, seed=0, condition=cold, max_turns=6, "
     "turns=9]", {}),
    ("episodes", "conditions_paired",
     "DELETE FROM episodes WHERE solver = 'bob' AND author = 'alice' AND seed = 1 AND condition = 'hinted'",
     "both conditions (cold and hinted) are present for every (env, solver, seed): 1 of 3 rows violate it, "
     "e.g. [env_id=alice.r0.0, seed=1, condition=cold, conditions_for_seed=cold]", {}),
    ("episodes", "conditions_paired",
     "INSERT INTO episodes SELECT * FROM episodes WHERE solver = 'bob' AND author = 'alice' AND seed = 0 "
     "AND condition = 'cold'",
     "one episode per (env, solver, seed, condition): 2 of 5 rows violate it", {}),
    ("episodes", "seeds_covered",
     "DELETE FROM episodes WHERE solver = 'bob' AND author = 'alice' AND seed = 1",
     "every valid environment x benchmark seed of the author was played: 2 of 4 rows violate it, "
     "e.g. [env_id=alice.r0.0, seed=1, condition=cold, seed_episodes=0]", {}),
    # An infrastructure error recorded as a solver failure: the pitfall the issue names first.
    ("episodes", "incomplete_episodes_flagged",
     "UPDATE episodes SET stop_reason = 'llm_error', error = 'Timeout' WHERE solver = 'bob' AND author = 'alice' "
     "AND seed = 0 AND condition = 'cold'",
     "episodes stopped by env_error/llm_error/length/stopped_at_budget are marked incomplete (never counted as failures): 1 of 1 rows "
     "violate it, e.g. [env_id=alice.r0.0, seed=0, condition=cold, status=failure]", {}),
    ("episodes", "incomplete_episodes_flagged",
     "UPDATE episodes SET error = NULL WHERE status = 'incomplete'",
     "incomplete episodes carry an error message: 1 of 1 rows violate it", {"author": "bob", "solver": "alice"}),
    ("episodes", "no_secrets_in_transcripts",
     "UPDATE episodes SET transcript = replace(transcript, 'My move', 'use OPENAI key sk-proj-Ab3dEf6hIj9kLm2nOp5q') "
     "WHERE solver = 'bob' AND author = 'alice' AND seed = 1 AND condition = 'hinted'",
     "transcripts and errors contain no secret-looking strings: 1 of 4 rows violate it, "
     "e.g. [env_id=alice.r0.0, seed=1, condition=hinted, secret_found=sk- API key: sk-p…(28 chars)]", {}),
    ("episodes", "no_secrets_in_transcripts",
     "UPDATE episodes SET transcript = replace(transcript, 'My move', 'auth token: 3f9a1c0b7d2e4f6a8b0c1d2e3f4a5b6c') "
     "WHERE solver = 'bob' AND author = 'alice' AND seed = 0 AND condition = 'cold'",
     "secret_found=token after key/token word: 3f9a…(32 chars)", {}),
    ("pair_lift", "lift_in_range",
     "UPDATE pair_lift SET lift_ci_lower = 0.5, lift_ci_upper = 1.2, lift_ci_reason = NULL "
     "WHERE author = 'alice' AND solver = 'bob'",
     "lift_ci_upper is in [-1, 1]: 1 of 4 rows violate it, e.g. [pair=0|alice|bob, lift_ci_lower=0.5, lift=1, "
     "lift_ci_upper=1.2", {}),
    ("pair_lift", "interval_contains_estimate",
     "UPDATE pair_lift SET lift_ci_lower = 0.5, lift_ci_upper = 0.6, lift_ci_reason = NULL "
     "WHERE author = 'alice' AND solver = 'alice'",
     "lift_ci_lower <= lift: 1 of 4 rows violate it, e.g. [pair=0|alice|alice, lift_ci_lower=0.5, lift=0, "
     "lift_ci_upper=0.6", {}),
    # One environment per author here: every published interval is NULL with its reason. A NULL interval
    # without a reason (a confident-looking blank) and an interval beside a reason both fail.
    ("pair_lift", "interval_contains_estimate",
     "UPDATE pair_lift SET lift_ci_reason = NULL WHERE author = 'bob' AND solver = 'alice'",
     "both lift_ci bounds given and no reason, or both NULL with lift_ci_reason saying why: 1 of 4 rows violate it",
     {}),
    ("pair_lift", "interval_contains_estimate",
     "UPDATE pair_lift SET lift_ci_lower = -0.5 WHERE author = 'bob' AND solver = 'alice'",
     "both lift_ci bounds given and no reason, or both NULL with lift_ci_reason saying why: 1 of 4 rows violate it",
     {}),
    ("pair_lift", "every_model_present", "DELETE FROM pair_lift WHERE author = 'alice' AND solver = 'bob'",
     "every peer pair of registry models (author with valid environments in the round) has a row: 1 of 2 rows "
     "violate it, e.g. [round=0, author=alice, solver=bob, pair_rows=0]", {}),
    ("pair_lift", "sample_size_minimum", "SELECT 1",
     "n_matched >= 2 (configured minimum): 1 of 4 rows violate it, e.g. [pair=0|bob|alice", {"min_matched": 2}),
    ("training", "rows_meet_learner_filter",
     "UPDATE episodes SET status = 'success', stop_reason = 'terminated', final_reward = 1 "
     "WHERE solver = 'bob' AND env_id = 'alice.r0.0' AND condition = 'cold' AND seed = 0",
     "p_cold recomputed from episodes <= training_max_cold (0): 1 of 1 rows violate it, "
     "e.g. [env_id=alice.r0.0, observed_p_cold=0.5]", {}),
    ("training", "rows_meet_learner_filter", "UPDATE training_set SET p_hint = 0.25",
     "recorded p_hint >= training_min_hint (0.5): 1 of 1 rows violate it, e.g. [env_id=alice.r0.0, p_hint=0.25]", {}),
    ("training", "rows_meet_learner_filter", "UPDATE training_set SET lift_lower = lift_upper",
     "lift_lower < lift_upper (a real, ordered interval): 1 of 1 rows violate it", {}),
    ("training", "rows_meet_learner_filter", "UPDATE training_set SET lift_lower = lift_lower + 0.05",
     "recorded lift interval equals the one recomputed from the episodes (fitted prior's central 95% posterior "
     "interval united with the uniform prior's): 1 of 1 rows violate it", {}),
    ("training", "rows_meet_learner_filter", "UPDATE training_set SET p_learnable = 0.99",
     "recorded p_learnable equals the one recomputed from the episodes: 1 of 1 rows violate it",
     {"method": "probability", "threshold": 0.1}),
    ("training", "rows_meet_learner_filter", "SELECT 1",
     "P(learnable) recomputed from the episodes >= training_admission_threshold (0.99): 1 of 1 rows violate it",
     {"method": "probability", "threshold": 0.99}),
    ("training", "no_duplicate_environments", "INSERT INTO training_set SELECT * REPLACE (2 AS rank) FROM training_set",
     "each environment appears once in the learner's set: 2 of 2 rows violate it, e.g. [env_id=alice.r0.0]", {}),
    ("training", "no_self_authored_environments",
     "INSERT INTO training_set SELECT * REPLACE ('bob.r0.0' AS env_id, 'bob' AS author, 2 AS rank, "
     "(SELECT source_sha256 FROM environments WHERE env_id = 'bob.r0.0') AS source_sha256) FROM training_set",
     "no environment authored by the learner 'bob': 1 of 2 rows violate it, e.g. [env_id=bob.r0.0, author=bob]", {}),
    ("training", "provenance_matches_environments", f"UPDATE training_set SET source_sha256 = '{'0' * 64}'",
     "source_sha256 matches `environments`: 1 of 1 rows violate it, e.g. [env_id=alice.r0.0, source_sha256=0000", {}),
    ("training", "provenance_matches_environments", "UPDATE environments SET valid = FALSE WHERE env_id = 'alice.r0.0'",
     "the environment exists in `environments` and is valid: 1 of 1 rows violate it", {}),
]


@pytest.mark.parametrize("suite,check,sql,message,kw", CORRUPTIONS,
                         ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CORRUPTIONS)])
def test_check_fails_on_the_bad_data_it_guards_against(wh, template, suite, check, sql, message, kw):
    wh.execute(sql)
    results = run_suite(wh, suite, template, **kw)
    assert failing(results) == {check}, {n: r.description for n, r in results.items() if not r.passed}
    result = results[check]
    assert message in result.description
    assert result.metadata["success"].value is False
    assert "**FAIL**" in result.metadata["expectations"].value
    assert message.split(":")[0] in result.metadata["failing_expectations"].value
    warn = check in {"every_model_present", "sample_size_minimum"}
    assert result.severity == (dg.AssetCheckSeverity.WARN if warn else dg.AssetCheckSeverity.ERROR)


def _comparable(results: dict[str, dg.AssetCheckResult]) -> dict:
    return {n: (r.passed, r.severity, r.description,
                {k: getattr(v, "value", v) for k, v in r.metadata.items() if k != "suite_seconds"})
            for n, r in results.items()}


@pytest.mark.parametrize("suite,check,sql,message,kw", [("clean", None, None, None, {}), *CORRUPTIONS],
                         ids=["clean", *[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CORRUPTIONS)]])
def test_the_pandas_first_pass_gives_the_verdicts_and_messages_of_great_expectations(
        wh, template, suite, check, sql, message, kw, monkeypatch):
    """Issue 34: on clean data and on every corruption, each suite's results (verdicts, descriptions,
    metadata but the timing) are the same with the pandas pass as with every rule run by GX."""
    from envduels_dagster.assets.checking import gx_runner

    if sql:
        wh.execute(sql)
    suites = [(suite, kw)] if suite != "clean" else [
        ("registry", {}), ("environments", {"author": "alice"}), ("episodes", {"author": "bob", "solver": "alice"}),
        ("pair_lift", {}), ("training", {"learner": "bob"})]
    for name, args in suites:
        fast = _comparable(run_suite(wh, name, template, **args))
        monkeypatch.setattr(gx_runner, "PANDAS_FIRST", False)
        reference = _comparable(run_suite(wh, name, template, **args))
        monkeypatch.setattr(gx_runner, "PANDAS_FIRST", True)
        assert fast == reference, name


def test_pair_lift_counting_incomplete_episodes_as_failures_is_caught(wh, template):
    """A mart that scores an infrastructure error as a solver failure disagrees with the episodes."""
    episodes = wh.execute("SELECT * FROM episodes").df()
    buggy = pair_lift(episodes.assign(status=episodes["status"].replace("incomplete", "failure")))
    wh.execute("DELETE FROM pair_lift")
    _insert(wh, "pair_lift", buggy)
    results = run_suite(wh, "pair_lift", template)
    assert failing(results) == {"incomplete_excluded"}
    text = results["incomplete_excluded"].description
    assert "n_matched equals the matched seeds of completed episodes: 1 of 4 rows violate it, " \
           "e.g. [pair=0|bob|alice" in text
    assert "n_incomplete equals the incomplete episodes of the pair" in text
    assert "lift equals its recomputation from completed, matched episodes" in text


def test_secret_from_registry_key_variable_is_caught_and_never_shown(wh, template, monkeypatch):
    secret = "zq9-Plain-Looking-Value-77"  # matches no key pattern: found only as the variable's value
    monkeypatch.setenv("ENVDUELS_TEST_PROVIDER_KEY", secret)
    wh.execute("UPDATE model_registry SET api_key_env = 'ENVDUELS_TEST_PROVIDER_KEY' WHERE name = 'bob'")
    assert not failing(run_suite(wh, "episodes", template))
    wh.execute(f"UPDATE episodes SET error = 'upstream echoed {secret}' WHERE solver = 'bob' AND seed = 1 "
               "AND condition = 'cold' AND author = 'alice'")
    results = run_suite(wh, "episodes", template)
    assert failing(results) == {"no_secrets_in_transcripts"}
    result = results["no_secrets_in_transcripts"]
    assert "secret_found=value of $ENVDUELS_TEST_PROVIDER_KEY (26 chars)" in result.description
    shown = result.description + json.dumps({k: str(v.value) for k, v in result.metadata.items()})
    assert secret not in shown


def test_key_pasted_into_registry_is_caught_and_redacted(wh, template):
    key = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv0123"
    wh.execute(f"UPDATE model_registry SET api_key_env = '{key}' WHERE name = 'bob'")
    results = run_suite(wh, "registry", template)
    assert failing(results) == {"holds_no_secrets"}
    result = results["holds_no_secrets"]
    assert "api_key_env is an environment variable name, not a key: 1 of 2 rows violate it" in result.description
    assert "no secret-looking strings in any text column" in result.description
    assert key not in result.description + json.dumps({k: str(v.value) for k, v in result.metadata.items()})


def test_self_authored_environments_pass_when_configured(wh, template):
    wh.execute(CORRUPTIONS[[c[1] for c in CORRUPTIONS].index("no_self_authored_environments")][2])
    assert not failing(run_suite(wh, "training", template, include_self=True))


def test_missing_table_fails_every_check_with_a_clear_message(wh, template):
    wh.execute("DROP TABLE pair_lift")
    results = run_suite(wh, "pair_lift", template)
    assert failing(results) == set(results) and len(results) == 5
    assert all(r.description == "table pair_lift not found in the warehouse: materialize pair_lift first"
               for r in results.values())


def test_pair_lift_check_tolerates_optional_columns_and_other_schemas(wh, template):
    """The dbt mart may live in another schema and drop optional columns: rules are skipped, not crashed."""
    wh.execute("CREATE SCHEMA marts")
    wh.execute("CREATE TABLE marts.pair_lift AS SELECT * EXCLUDE (n_incomplete, p_cold, p_hint) FROM pair_lift")
    wh.execute("DROP TABLE pair_lift")
    results = run_suite(wh, "pair_lift", template)
    assert not failing(results)
    assert results["incomplete_excluded"].metadata["statistics"].value["skipped_expectations"] == 1
    assert "skipped" in results["incomplete_excluded"].description


def test_pair_lift_kept_per_round_is_recomputed_per_round(wh, template):
    assert "round" in wh.execute("SELECT * FROM pair_lift LIMIT 0").df().columns  # the contract carries round
    assert not failing(run_suite(wh, "pair_lift", template))
    wh.execute("INSERT INTO pair_lift SELECT * REPLACE (1 AS round) FROM pair_lift WHERE author = 'alice'")
    results = run_suite(wh, "pair_lift", template)
    assert failing(results) == {"incomplete_excluded"}  # round 1 rows with no round-1 episodes behind them
    assert "n_matched equals the matched seeds of completed episodes: 2 of 6 rows violate it, " \
           "e.g. [pair=1|alice|alice" in results["incomplete_excluded"].description


# ---------------------------------------------------------------------------------------------
# Blocking: a bad training set stops the downstream step of the same run.
# ---------------------------------------------------------------------------------------------

BLOCKING = {c[1]: c[2] for c in CORRUPTIONS if c[0] == "training" and not c[4]}
TRAINING_PARTITIONS = next(iter(training_set_checks.check_specs)).partitions_def


def _training_writer(corruption: str | None):
    """Stands in for the training_set asset (same key and partitions) and writes the set, optionally corrupted."""

    @dg.asset(name="training_set", partitions_def=TRAINING_PARTITIONS)
    def training_set(context: dg.AssetExecutionContext, warehouse: DuckDBResource) -> None:
        if corruption:
            with warehouse.get_connection() as conn:
                conn.execute(corruption)

    return training_set


def _publisher(export: Path):
    @dg.asset(partitions_def=TRAINING_PARTITIONS, deps=[dg.AssetKey("training_set")])
    def published_training_set(context: dg.AssetExecutionContext, warehouse: DuckDBResource) -> None:
        with warehouse.get_connection() as conn:
            rows = conn.execute("SELECT env_id FROM training_set WHERE learner = ? ORDER BY rank",
                                [context.partition_key]).fetchall()
        export.write_text(json.dumps([r[0] for r in rows]))

    return published_training_set


@pytest.mark.parametrize("check", sorted(BLOCKING) + [None])
def test_blocking_training_checks_stop_publication(template, tmp_path, check):
    path = tmp_path / "warehouse.duckdb"
    shutil.copy(template[0], path)
    export = tmp_path / "published.json"
    export.write_text('["previously published"]')
    instance = dg.DagsterInstance.ephemeral()
    register_models(instance, ["alice", "bob"])
    result = dg.materialize(
        [_training_writer(BLOCKING.get(check)), _publisher(export), training_set_checks], instance=instance,
        resources={"warehouse": DuckDBResource(database=str(path)),
                   "settings": DuelSettings(training_admission="rule"),
                   PUBLISHED_IO_MANAGER_KEY: PublishedTableIOManager(root=str(tmp_path / "published"))},
        partition_key="bob", raise_on_error=False)
    materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert set(evaluations) == set(BLOCKING)
    assert all(e.partition == "bob" for e in evaluations.values())
    if check is None:  # control: a good set is checked, then published
        assert result.success and materialized == {"training_set", "published_training_set"}
        assert json.loads(export.read_text()) == ["alice.r0.0"]
        return
    assert not result.success
    assert materialized == {"training_set"}  # the downstream step never ran ...
    assert export.read_text() == '["previously published"]'  # ... and the published export is intact
    assert {n for n, e in evaluations.items() if not e.passed} == {check}
    assert evaluations[check].severity == dg.AssetCheckSeverity.ERROR
    assert dg.AssetCheckKey(dg.AssetKey("training_set"), check) in training_set_checks.check_keys


# ---------------------------------------------------------------------------------------------
# A real simulated pipeline: every check passes on a clean run, checks see their partition.
# ---------------------------------------------------------------------------------------------

ALL_CHECKS = list(build_definitions().asset_checks)
MY_CHECKS = {key for c in ALL_CHECKS for key in c.check_keys}


def _check_evaluations(instance) -> list:
    out = []
    for run in instance.get_runs():
        for record in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
            out.append(record.dagster_event.event_specific_data)
    return out


ROUND0 = ["model_registry", "authored_environments", "duel_episodes", "pair_lift", "training_set"]


@pytest.fixture(scope="module")
def sim_pipeline(tmp_path_factory):
    """Registry -> authors -> pairs -> the pair_lift mart (dbt) -> training sets, every run with ALL_CHECKS.

    Round 0 only, and only the assets the checks guard (the demo runs everything; too slow here).
    """
    ALL_ASSETS = list(build_definitions().assets)

    tmp = tmp_path_factory.mktemp("sim")
    registry = write_registry(tmp / "models.yaml", ["oracle", "novice"])
    resources = pipeline_resources(tmp, registry, envs_per_author=1, seeds=(0, 1), check_min_matched_seeds=1)
    instance = dg.DagsterInstance.ephemeral()
    names = ["oracle", "novice"]
    register_models(instance, names)
    by_key = {k.to_user_string(): a for a in ALL_ASSETS for k in a.keys}
    assert set(ROUND0) <= set(by_key), "an asset the checks guard is missing from ALL_ASSETS"

    def upstream_in_definition(key: str) -> list[dg.AssetKey]:
        """``key`` and what it needs from the same definition (for dbt: pair_lift and the models it reads)."""
        defn, needed, todo = by_key[key], set(), [dg.AssetKey(key)]
        while todo:
            k = todo.pop()
            if k not in needed and k in defn.keys:
                needed.add(k)
                todo += list(defn.asset_deps.get(k, ()))
        return sorted(needed, key=str)

    def run(key: str, partition_key=None) -> None:
        result = dg.materialize([by_key[key], *ALL_CHECKS], selection=upstream_in_definition(key), instance=instance,
                                resources=resources, partition_key=partition_key, raise_on_error=False)
        assert result.success, f"run of {key} [{partition_key}] failed"

    run("model_registry")
    for author in names:
        run("authored_environments", author)
    for author in names:
        for solver in names:
            run("duel_episodes", dg.MultiPartitionKey({"author": author, "solver": solver}))
    run("pair_lift")
    for learner in names:
        run("training_set", learner)
    return instance, resources, tmp / "warehouse.duckdb"


def test_every_check_passes_on_a_clean_simulated_run(sim_pipeline):
    instance, _, _ = sim_pipeline
    evaluations = [e for e in _check_evaluations(instance)
                   if dg.AssetCheckKey(e.asset_key, e.check_name) in MY_CHECKS]
    bad = {(e.asset_key.to_user_string(), e.check_name, e.partition): e.description
           for e in evaluations if not e.passed}
    assert not bad
    seen = {(e.asset_key.to_user_string(), e.check_name) for e in evaluations}
    assert seen == {(k.asset_key.to_user_string(), k.name) for k in MY_CHECKS if k.asset_key.to_user_string() in ROUND0}
    partitions = {e.partition for e in evaluations if e.asset_key == dg.AssetKey("duel_episodes")}
    assert partitions == {"novice|novice", "novice|oracle", "oracle|novice", "oracle|oracle"}


def test_episode_check_reads_only_its_partition(sim_pipeline):
    """Corrupt one pair in the warehouse; a check-only run on each pair flags exactly that pair."""
    duel_episodes_checks = next(c for c in ALL_CHECKS if c.node_def.name == "duel_episodes_checks")
    instance, resources, _ = sim_pipeline
    warehouse = resources["warehouse"]  # same connection config as the runs' (DuckDB insists)
    pairs = ("oracle|novice", "novice|oracle")
    with warehouse.get_connection() as conn:  # corrupt a pair that has rows (an author's one environment may
        played = {a + "|" + s for a, s in conn.execute(  # be invalid in the simulated draws, leaving none)
            "SELECT DISTINCT author, solver FROM episodes").fetchall()}
        bad = next(p for p in pairs if p in played)
        author, solver = bad.split("|")
        conn.execute("UPDATE episodes SET turns = turns + max_turns + 1 WHERE author = ? AND solver = ?",
                     [author, solver])
    try:
        job = dg.define_asset_job("episode_checks", selection=dg.AssetSelection.checks(duel_episodes_checks))
        defs = dg.Definitions(assets=[], asset_checks=[duel_episodes_checks], jobs=[job], resources=resources)
        verdicts = {}
        for pair in pairs:
            result = defs.resolve_job_def("episode_checks").execute_in_process(
                instance=instance, tags={"dagster/partition": pair}, raise_on_error=False)
            evals = {e.check_name: e for e in result.get_asset_check_evaluations()}
            assert {e.partition for e in evals.values()} == {pair}
            verdicts[pair] = {n for n, e in evals.items() if not e.passed}
        assert verdicts == {p: {"turns_within_max_turns"} if p == bad else set() for p in pairs}
    finally:
        with warehouse.get_connection() as conn:
            conn.execute("UPDATE episodes SET turns = turns - max_turns - 1 WHERE author = ? AND solver = ?",
                         [author, solver])


def test_real_training_set_is_checked_then_published(sim_pipeline, tmp_path):
    from envduels_dagster.assets.training.assets import training_set

    instance, resources, _ = sim_pipeline
    export = tmp_path / "published.json"
    result = dg.materialize([training_set, _publisher(export), *ALL_CHECKS], instance=instance,
                            selection=[dg.AssetKey("training_set"), dg.AssetKey("published_training_set")],
                            resources=resources, partition_key="novice", raise_on_error=False)
    assert result.success
    assert {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()} == {
        "training_set", "published_training_set"}
    assert all(e.passed for e in result.get_asset_check_evaluations())
    assert isinstance(json.loads(export.read_text()), list)


def test_conditions_paired_blocks_every_rounds_pair_runs_and_seed_coverage_does_not():
    """Issue 33: unpaired or duplicated episodes fed the marts because conditions_paired did not block. Blocking, a
    failure fails the pair run, its request stage fails, and the request never refreshes the marts. Seed coverage
    stays non-blocking: adaptive sampling leaves settled seeds unplayed on purpose."""
    from envduels_dagster.definitions import build_definitions

    specs = {(s.asset_key.to_user_string(), s.name): s for c in build_definitions().asset_checks or []
             for s in c.check_specs}
    for asset in ("duel_episodes", "duel_episodes_r1"):
        assert specs[(asset, "conditions_paired")].blocking
        assert not specs[(asset, "seeds_covered")].blocking
