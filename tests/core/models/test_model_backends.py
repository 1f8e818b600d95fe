"""The backend registry: a model string's prefix picks its backend; unknown prefixes fail clearly
and only for their own model; core never imports the simulated models (they are a provider)."""

from __future__ import annotations

import ast
import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from envduels_dagster.core.models import Gateway, LLMError
from envduels_dagster.core.models.http_backend import LeanHTTPBackend
from envduels_dagster.core.models.litellm_backend import LitellmBackend
from envduels_dagster.core.models.litellm_lean import LitellmLeanBackend
from envduels_dagster.core.models.providers import (
    LITELLM_PROVIDERS,
    UnknownProviderError,
    backend_name,
    known_prefixes,
)
from envduels_dagster.core.models.registry import RegistryError, load_registry
from tests.helpers.paths import REPO

CORE = REPO / "envduels_dagster" / "core"


def registry(tmp_path, body: str):
    path = tmp_path / "models.yaml"
    path.write_text("models:\n" + body)
    return load_registry(path)


def test_each_prefix_gets_its_backend(tmp_path):
    from envduels_dagster.sim.provider import SimBackend

    reg = registry(tmp_path, "  - {name: sim, model: envduels-sim/novice}\n"
                             "  - {name: lean, model: hosted_vllm/q, api_base: 'http://127.0.0.1:9/v1'}\n"
                             "  - {name: forced, model: openai/q, api_base: 'http://127.0.0.1:9/v1', client: litellm}\n"
                             "  - {name: cloud, model: anthropic/claude}\n"
                             "  - {name: full, model: anthropic/claude, client: litellm-full}\n"
                             "  - {name: other, model: groq/llama}\n")
    gateway = Gateway(reg)
    kinds = {name: type(gateway.backend(reg.get(name))) for name in reg.names}
    assert kinds == {"sim": SimBackend, "lean": LeanHTTPBackend, "forced": LitellmLeanBackend,
                     "cloud": LitellmLeanBackend, "full": LitellmBackend, "other": LitellmBackend}
    assert gateway.backend(reg.get("forced")) is gateway.backend(reg.get("cloud"))  # one instance per backend
    assert gateway.backend(reg.get("full")) is gateway.backend(reg.get("other"))
    assert [m.is_simulated for m in reg.models] == [True, False, False, False, False, False]


def test_unknown_prefix_names_the_model_string_and_the_known_prefixes():
    with pytest.raises(UnknownProviderError) as info:
        backend_name("opneai/gpt-4o-mini")
    message = str(info.value)
    assert "model 'opneai/gpt-4o-mini'" in message and "prefix 'opneai'" in message
    assert "did you mean openai" in message
    assert "known prefixes: envduels-sim" in message and "anthropic" in message and "hosted_vllm" in message
    assert set(known_prefixes()) >= {"envduels-sim", *LITELLM_PROVIDERS}


def test_an_unknown_prefix_fails_only_its_own_model_as_a_fatal_bad_request(tmp_path):
    reg = registry(tmp_path, "  - {name: bad, model: nosuchprovider/foo}\n  - {name: ok, model: envduels-sim/novice}\n")
    gateway = Gateway(reg)  # the registry loads: the other models keep working

    async def main():
        with pytest.raises(LLMError) as info:
            await gateway.chat("bad", [{"role": "user", "content": "hi"}])
        ok = await gateway.chat("ok", [{"role": "user", "content": "Observation: I am thinking of an integer "
                                                                   "between 1 and 10."}], seed=0)
        return info.value, ok

    error, ok = asyncio.run(main())
    assert error.error_class == "bad_request" and error.fatal
    assert "'nosuchprovider/foo'" in error.message and "known prefixes" in error.message
    assert "\\boxed{" in ok.text
    assert gateway.stats.backend_calls == {"ok": 1} and gateway.stats.errors == {"bad_request": 1}


def test_a_provider_checks_its_own_model_strings_at_load_time(tmp_path):
    with pytest.raises(RegistryError, match="entry #1 \\('m'\\): field 'model': unknown simulated profile 'wizard'"):
        registry(tmp_path, "  - {name: m, model: envduels-sim/wizard}\n")


@pytest.mark.slow  # a few seconds or more (measured with --durations, loaded 2-core machine)
def test_litellm_provider_snapshot_matches_the_pinned_litellm():
    from envduels_dagster.core.models.litellm_backend import litellm_module

    litellm = litellm_module()
    installed = {getattr(p, "value", p) for p in litellm.provider_list}
    assert installed == LITELLM_PROVIDERS, "update LITELLM_PROVIDERS in core/models/providers.py with litellm"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_core_never_imports_the_simulated_models_or_dagster():
    offenders = {str(p.relative_to(CORE)): sorted(n for n in _imports(p)
                                                  if n.startswith(("envduels_dagster.sim", "dagster")))
                 for p in CORE.rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_importing_the_gateway_imports_no_backend():
    code = ("import sys, envduels_dagster.core.models, envduels_dagster.core.authoring.prompts, envduels_dagster.core.play.episode;"
            "print(sorted(m for m in sys.modules if m.startswith(('litellm', 'envduels_dagster.sim', 'aiohttp'))"
            " or m.endswith(('litellm_backend', 'http_backend', 'fast_client'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_package_registers_a_provider_through_its_entry_point(tmp_path):
    """A real distribution on the path (dist-info with entry_points.txt), found by importlib.metadata."""
    dist = tmp_path / "echo_provider-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-provider\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[envduels_dagster.providers]\necho = echo_backend:EchoBackend\n")
    (tmp_path / "echo_backend.py").write_text(
        "from envduels_dagster.core.models.types import Completion\n"
        "class EchoBackend:\n"
        "    simulated = True\n"
        "    def __init__(self, options): pass\n"
        "    async def complete(self, entry, call):\n"
        "        return Completion('echo: ' + call.messages[-1]['content'], 1, 1)\n"
        "    async def aclose(self): pass\n")
    (tmp_path / "models.yaml").write_text("models:\n  - {name: e, model: echo/any}\n")
    code = ("import asyncio; from envduels_dagster.core.models import Gateway;"
            "from envduels_dagster.core.models.registry import load_registry;"
            f"g = Gateway(load_registry({str(tmp_path / 'models.yaml')!r}));"
            "print(asyncio.run(g.chat('e', [{'role': 'user', 'content': 'hi'}])).text, g.registry.models[0].is_simulated)")
    env = {**__import__("os").environ, "PYTHONPATH": f"{tmp_path}:{REPO}"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip() == "echo: hi True"
