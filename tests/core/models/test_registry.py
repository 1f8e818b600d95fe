"""The YAML model registry: valid files, every malformed case, keys, the file it is given (which file:
tests/settings/test_locations.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from envduels_dagster.core.models import Gateway
from envduels_dagster.core.models.registry import (
    DEFAULT_REGISTRY,
    RegistryError,
    dump_entry,
    load_registry,
)
from envduels_dagster.sim.profiles import PROFILES


def test_repository_registry_lists_the_simulated_models():
    registry = load_registry(DEFAULT_REGISTRY)
    assert registry.names == list(PROFILES)  # the five profiles, strongest first
    assert all(m.is_simulated and m.api_key_env is None for m in registry.models)


def test_valid_registry_with_defaults_and_full_entries(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text(
        "models:\n"
        "  - name: novice\n"
        "    model: envduels-sim/novice\n"
        "  - name: gpt-mini\n"
        "    model: openai/gpt-4o-mini\n"
        "    api_key_env: OPENAI_API_KEY\n"
        "    version: '2024-07-18'\n"
        "    temperature: 0.7\n"
        "    max_tokens: 512\n"
        "    pool: openai-main\n"
        "    input_cost_per_mtok: 0.15\n"
        "    output_cost_per_mtok: 0.6\n"
        "  - name: local.vllm\n"
        "    model: hosted_vllm/qwen\n"
        "    api_base: http://127.0.0.1:8000/v1\n"
    )
    reg = load_registry(path)
    assert reg.path == str(path)
    assert reg.names == ["novice", "gpt-mini", "local.vllm"]
    sim, mini, vllm = reg.models
    # documented defaults for everything but name/model
    assert (sim.api_base, sim.api_key_env, sim.version, sim.temperature, sim.max_tokens) == (None, None, "1", 0.0, 1024)
    assert sim.provider == "envduels-sim" and sim.is_simulated
    assert mini.provider == "openai-main" and not mini.is_simulated
    assert mini.version == "2024-07-18"
    # 1000 prompt + 2000 completion tokens at 0.15 / 0.6 USD per million
    assert mini.cost(1000, 2000) == pytest.approx((1000 * 0.15 + 2000 * 0.6) / 1e6)
    assert vllm.api_base == "http://127.0.0.1:8000/v1" and vllm.provider == "hosted_vllm"
    assert reg.get("gpt-mini") is mini


def _error(tmp_path: Path, text: str) -> tuple[RegistryError, Path]:
    path = tmp_path / "models.yaml"
    path.write_text(text)
    with pytest.raises(RegistryError) as info:
        load_registry(path)
    return info.value, path


@pytest.mark.parametrize(
    ("text", "entry", "field", "fragment"),
    [
        # duplicate names: the second entry is blamed and points back at the first
        ("models:\n  - name: a\n    model: x/y\n  - name: a\n    model: x/z\n",
         "#2 ('a')", "name", "duplicate name (also entry #1)"),
        ("models:\n  - name: a\n    model: x/y\n    colour: red\n", "#1 ('a')", "colour", "unknown key"),
        ("models:\n  - name: a\n    model: x/y\n  - name: b\n", "#2 ('b')", "model", "Field required"),
        ("models:\n  - model: x/y\n", "#1", "name", "Field required"),
        ("models:\n  - name: 'bad name'\n    model: x/y\n", "#1 ('bad name')", "name",
         "must be 1-64 letters, digits"),
        ("models:\n  - name: a\n    model: gpt4\n", "#1 ('a')", "model", "must look like 'provider/model'"),
        ("models:\n  - name: a\n    model: envduels-sim/wizard\n", "#1 ('a')", "model",
         "unknown simulated profile 'wizard'"),
        ("models:\n  - name: a\n    model: x/y\n    temperature: 5\n", "#1 ('a')", "temperature",
         "less than or equal to 2"),
        ("models:\n  - just-a-string\n", "#1", None, "each entry must be a mapping"),
        # registry holes found by the reliability round (issue 33, item 6)
        ('models:\n  - name: "novice\\n"\n    model: x/y\n', "#1 ('novice\\n')", "name", "must be 1-64 letters"),
        ("models:\n  - name: a\n    model: /\n", "#1 ('a')", "model", "must look like 'provider/model'"),
        ("models:\n  - name: a\n    model: openai/\n", "#1 ('a')", "model", "must look like 'provider/model'"),
        ("models:\n  - name: a\n    model: x/y\n    api_base: ftp://host/v1\n", "#1 ('a')", "api_base",
         "must be an http:// or https:// URL"),
        ("models:\n  - name: a\n    model: x/y\n    api_base: localhost:8000\n", "#1 ('a')", "api_base",
         "must be an http:// or https:// URL"),
        ("models:\n  - name: a\n    model: x/y\n    input_cost_per_mtok: .inf\n", "#1 ('a')",
         "input_cost_per_mtok", "finite number"),
        ("models:\n  - name: a\n    model: x/y\n    budget_usd: .nan\n", "#1 ('a')", "budget_usd", "finite number"),
        ("models:\n  - name: a\n    model: x/y\n    budget_usd: 0\n", "#1 ('a')", "budget_usd", "greater than 0"),
        # roles (issue 30)
        ("models:\n  - name: a\n    model: x/y\n    roles: []\n", "#1 ('a')", "roles", "needs at least one of"),
        ("models:\n  - name: a\n    model: x/y\n    roles: [author, author]\n", "#1 ('a')", "roles",
         "lists a role twice"),
        ("models:\n  - name: a\n    model: x/y\n    roles: [judge]\n", "#1 ('a')", "roles.0",
         "Input should be 'author' or 'solver'"),
        # provider options (issue 31): plain JSON, never a key, never what the engine sets
        ("models:\n  - name: a\n    model: x/y\n    params: {api_key: sk-1}\n", "#1 ('a')", "params",
         "api_key is set by the engine or the registry"),
        ("models:\n  - name: a\n    model: x/y\n    params: {extra_body: {Authorization: b}}\n", "#1 ('a')",
         "params", "extra_body.Authorization: looks like a credential"),
        ("models:\n  - name: a\n    model: x/y\n    params: {top_p: .inf}\n", "#1 ('a')", "params",
         "top_p: must be a finite number"),
        ("models:\n  - name: a\n    model: x/y\n    params: {when: 2024-01-01}\n", "#1 ('a')", "params",
         "when: must be a plain JSON value, not date"),
        ("models:\n  - name: a\n    model: x/y\n    timeout_s: 0\n", "#1 ('a')", "timeout_s", "greater than 0"),
        ("models:\n  - name: a\n    model: x/y\n    timeout_s: -5\n", "#1 ('a')", "timeout_s", "greater than 0"),
        ("models:\n  - name: a\n    model: x/y\n    params: {temperature: 1}\n", "#1 ('a')", "params",
         "temperature is set by the engine or the registry"),
        ("models:\n  - name: a\n    model: x/y\n    params: {extra_body: {x_api_secret: s}}\n", "#1 ('a')",
         "params", "extra_body.x_api_secret: looks like a credential"),
        ("models:\n  - name: a\n    model: x/y\n    params: {headers: {a: b}}\n", "#1 ('a')", "params",
         "headers is set by the engine or the registry"),
        ("models:\n  - name: a\n    model: x/y\n    params: {extra_body: {model: other, top_k: 3}}\n", "#1 ('a')",
         "params", "extra_body.model is set by the engine or the registry"),
        ("models:\n  - name: a\n    model: x/y\n    params: {extra_body: [1]}\n", "#1 ('a')", "params",
         "extra_body: must be a mapping of request body fields"),
        ("models:\n  - name: a\n    model: x/y\n    max_reply_bytes: 10\n", "#1 ('a')", "max_reply_bytes",
         "greater than or equal to 1024"),
        ("models:\n  - name: a\n    model: x/y\n    tokens_per_minute: -1\n", "#1 ('a')", "tokens_per_minute",
         "greater than 0"),
        # the lean client needs an OpenAI-compatible server: refused at load, not at the first call (issue 47)
        ("models:\n  - name: a\n    model: anthropic/claude\n    client: fast\n", "#1 ('a')", "client",
         "'fast' needs an openai/ or hosted_vllm/ model with api_base"),
        ("models:\n  - name: a\n    model: openai/gpt-4o-mini\n    client: fast\n", "#1 ('a')", "client",
         "'fast' needs an openai/ or hosted_vllm/ model with api_base"),
        # every field checked at load (issue 47): a variable's name, numbers that are numbers, labels that are labels
        ("models:\n  - name: a\n    model: x/y\n    api_key_env: OPENAI KEY\n", "#1 ('a')", "api_key_env",
         "must be the NAME of an environment variable"),
        ("models:\n  - name: a\n    model: x/y\n    api_key_env: 1KEY\n", "#1 ('a')", "api_key_env",
         "must be the NAME of an environment variable"),
        ("models:\n  - name: a\n    model: x/y\n    api_key_env: sk-abcdefghijklmnopqrstu\n", "#1 ('a')",
         "api_key_env", "looks like a key itself"),
        ("models:\n  - name: a\n    model: x/y\n    api_key_env: hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345\n", "#1 ('a')",
         "api_key_env", "looks like a key itself"),
        ("models:\n  - name: a\n    model: x/y\n    max_tokens: true\n", "#1 ('a')", "max_tokens",
         "must be a number, not true/false"),
        ("models:\n  - name: a\n    model: x/y\n    temperature: '0.5'\n", "#1 ('a')", "temperature",
         "must be a number, not text"),
        ("models:\n  - name: a\n    model: x/y\n    input_cost_per_mtok: '3'\n", "#1 ('a')", "input_cost_per_mtok",
         "must be a number, not text"),
        ("models:\n  - name: a\n    model: x/y\n    max_in_flight: false\n", "#1 ('a')", "max_in_flight",
         "must be a number, not true/false"),
        ("models:\n  - name: a\n    model: x/y\n    api_base: http://h/v1\n    request_contract: 'yes'\n", "#1 ('a')",
         "request_contract", "must be true or false, not str"),
        ("models:\n  - name: a\n    model: x/y\n    version: 1.10\n", "#1 ('a')", "version",
         "must be text: quote it"),
        ("models:\n  - name: a\n    model: x/y\n    version: ' 2'\n", "#1 ('a')", "version",
         "1-64 printable characters without surrounding spaces"),
        ("models:\n  - name: a\n    model: x/y\n    version: ''\n", "#1 ('a')", "version",
         "1-64 printable characters without surrounding spaces"),
        ("models:\n  - name: a\n    model: x/y\n    pool: my pool\n", "#1 ('a')", "pool",
         "must be 1-64 letters, digits"),
        # entries of one pool share the account's limits: two different values contradict each other
        ("models:\n  - name: a\n    model: x/y\n    pool: acct\n    requests_per_minute: 60\n"
         "  - name: b\n    model: x/z\n    pool: acct\n    requests_per_minute: 120\n", "#2 ('b')",
         "requests_per_minute", "pool 'acct' has requests_per_minute = 60.0 in entry #1 ('a') but 120.0 here"),
        ("models:\n  - name: a\n    model: x/y\n    max_in_flight: 4\n"
         "  - name: b\n    model: x/z\n    max_in_flight: 8\n", "#2 ('b')",
         "max_in_flight", "pool 'x' has max_in_flight = 4 in entry #1 ('a') but 8 here"),
    ],
)
def test_malformed_entries_name_file_entry_and_field(tmp_path, text, entry, field, fragment):
    err, path = _error(tmp_path, text)
    message = str(err)
    assert message.startswith(str(path) + ": ")
    assert f"entry {entry}" in message
    assert err.entry == entry
    assert err.field == field
    if field is not None:
        assert f"field '{field}'" in message
    assert fragment in message
    assert "Value error," not in message  # pydantic's prefix is noise for a user


def test_an_entry_is_checked_whole_and_every_bad_field_is_named(tmp_path):
    """Issue 47: one load names every field of the entry in error (the first in RegistryError.field), so a user
    fixes them in one go instead of one per try."""
    err, path = _error(tmp_path, "models:\n  - name: a\n    model: x/y\n    max_tokens: true\n    temperature: 9\n"
                                 "    api_key_env: MY KEY\n    colour: red\n")
    assert err.entry == "#1 ('a')" and err.field == "api_key_env"  # the first in the entry's field order
    message = str(err)
    assert message.startswith(f"{path}: entry #1 ('a'): field 'api_key_env': must be the NAME of an environment")
    for field, fragment in (("max_tokens", "must be a number, not true/false"),
                            ("temperature", "Input should be less than or equal to 2"), ("colour", "unknown key")):
        assert f"field '{field}': {fragment}" in message


def test_a_pasted_key_is_refused_without_being_repeated(tmp_path):
    key = "sk-proj-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7" * 2
    err, _ = _error(tmp_path, f"models:\n  - name: a\n    model: openai/gpt-4o\n    api_key_env: {key}\n")
    assert err.field == "api_key_env" and "looks like a key itself" in str(err)
    assert key not in str(err) and key[:12] not in str(err) and err.__cause__ is None


def test_entries_of_one_pool_may_leave_a_limit_to_the_entry_that_sets_it(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - name: a\n    model: x/y\n    pool: acct\n    requests_per_minute: 60\n"
                    "  - name: b\n    model: x/z\n    pool: acct\n  - name: c\n    model: x/w\n    pool: acct\n"
                    "    requests_per_minute: 60\n    api_key_env: ACCT_KEY\n    version: '2024-06'\n")
    reg = load_registry(path)
    assert [m.requests_per_minute for m in reg.models] == [60, None, 60]
    assert reg.get("c").api_key_env == "ACCT_KEY" and reg.get("c").version == "2024-06"



def test_scientific_notation_that_yaml_leaves_as_text_is_a_number(tmp_path):
    # YAML 1.1 reads 1e3 and 2.5e-1 as strings (no dot, or no exponent sign); a user wrote a number
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - name: a\n    model: x/y\n    input_cost_per_mtok: 1e3\n"
                    "    output_cost_per_mtok: 2.5e-1\n")
    entry = load_registry(path).get("a")
    assert (entry.input_cost_per_mtok, entry.output_cost_per_mtok) == (1000.0, 0.25)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("models:\n  - name: a\n    model: [x\n", "invalid YAML at line 4, column 1"),
        ("models:\n  - name: a\n\tmodel: x/y\n", "invalid YAML at line 3"),
        ("- name: a\n  model: x/y\n", "expected a mapping with a 'models' list"),
        ("models: {}\n", "expected a mapping with a 'models' list"),
        ("models: []\n", "the registry lists no models"),
        ("models:\n  - name: a\n    model: x/y\nsettings: 1\n", "unknown top-level key(s): settings"),
    ],
)
def test_malformed_files_name_the_file(tmp_path, text, fragment):
    err, path = _error(tmp_path, text)
    assert str(err).startswith(str(path) + ": ")
    assert fragment in str(err)


def test_roles_options_and_limits_load_with_their_defaults(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text(
        "models:\n"
        "  - name: writer\n"
        "    model: openai/gpt-4o-mini\n"
        "    roles: [author]\n"
        "    budget_usd: 2.5\n"
        "  - name: learner\n"
        "    model: openai/o3-mini\n"
        "    roles: solver\n"
        "    timeout_s: 600\n"
        "    params: {reasoning_effort: high, extra_body: {thinking: {type: enabled, budget_tokens: 2048}}}\n"
        "    output_cost_per_mtok: 4\n"
        "    reasoning_cost_per_mtok: 8\n"
        "    tokens_per_minute: 200000\n"
        "    max_in_flight: 16\n"
        "  - name: both\n"
        "    model: envduels-sim/novice\n"
        "    roles: [solver, author]\n"
    )
    reg = load_registry(path)
    writer, learner, both = reg.models
    assert (writer.roles, writer.authors, writer.solves, writer.budget_usd) == (("author",), True, False, 2.5)
    assert learner.roles == ("solver",) and both.roles == ("author", "solver")  # canonical order
    assert reg.authors == ["writer", "both"] and reg.solvers == ["learner", "both"]
    assert learner.params["extra_body"]["thinking"]["budget_tokens"] == 2048
    assert (learner.timeout_s, learner.tokens_per_minute, learner.max_in_flight) == (600, 200000, 16)
    # defaults: both roles, no cap, 60 s, no options, reasoning priced as output, 8 MiB replies
    assert (both.budget_usd, both.timeout_s, both.params, both.reasoning_cost_per_mtok) == (None, 60.0, {}, None)
    assert both.max_reply_bytes == 8 * 1024 * 1024 and both.max_in_flight is None
    # 1000 completion tokens of which 600 reasoning: 400 at 4 USD + 600 at 8 USD per million
    assert learner.cost(0, 1000, reasoning_tokens=600) == pytest.approx((400 * 4 + 600 * 8) / 1e6)
    assert both.cost(0, 1000, reasoning_tokens=600) == both.cost(0, 1000)  # unpriced reasoning = output price
    row = dump_entry(learner)
    assert row["roles"] == "solver" and json.loads(row["params"])["reasoning_effort"] == "high"


def test_missing_file_is_a_registry_error(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(RegistryError, match="cannot read the registry") as info:
        load_registry(path)
    assert str(path) in str(info.value)


def test_unknown_model_name_lists_the_known_ones(sim_registry):
    reg = load_registry(sim_registry(["oracle", "novice"]))
    with pytest.raises(RegistryError, match=r"no model named 'gpt'; known: oracle, novice"):
        reg.get("gpt")


def test_api_key_read_from_the_named_variable_only_when_requested(tmp_path, monkeypatch):
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - name: mini\n    model: openai/gpt-4o-mini\n    api_key_env: ENVDUELS_TEST_KEY\n")
    monkeypatch.delenv("ENVDUELS_TEST_KEY", raising=False)
    reg = load_registry(path)  # loading does not need the key
    with pytest.raises(RegistryError) as info:
        reg.api_key("mini")
    err = info.value
    assert err.field == "api_key_env" and err.entry == "'mini'"
    assert str(err) == f"{path}: entry 'mini': field 'api_key_env': environment variable ENVDUELS_TEST_KEY is not set"

    monkeypatch.setenv("ENVDUELS_TEST_KEY", "")  # empty counts as unset
    with pytest.raises(RegistryError, match="ENVDUELS_TEST_KEY is not set"):
        reg.api_key("mini")

    monkeypatch.setenv("ENVDUELS_TEST_KEY", "sk-test-123")
    assert reg.api_key("mini") == "sk-test-123"
    assert "sk-test-123" not in path.read_text() + repr(reg)  # the key never lands in the registry


def test_gateway_refuses_a_model_whose_key_is_unset_before_any_call(tmp_path, monkeypatch):
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - name: mini\n    model: openai/gpt-4o-mini\n    api_key_env: ENVDUELS_TEST_KEY\n")
    monkeypatch.delenv("ENVDUELS_TEST_KEY", raising=False)
    gateway = Gateway(load_registry(path))
    with pytest.raises(RegistryError, match="field 'api_key_env'"):
        asyncio.run(gateway.chat("mini", [{"role": "user", "content": "hi"}]))
    assert sum(gateway.stats.backend_calls.values()) == 0


def test_the_engine_loads_the_file_it_is_given_whatever_the_variable_says(sim_registry, monkeypatch):
    """Which file is the caller's choice (settings/locations.registry_file, tests/settings/test_locations.py)."""
    path = sim_registry(["expert", "apprentice"])
    monkeypatch.setenv("ENVDUELS_REGISTRY", str(DEFAULT_REGISTRY))
    assert load_registry(path).names == ["expert", "apprentice"]
