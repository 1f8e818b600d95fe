"""The registry of backends: a model string's prefix decides which backend serves it.

Why a table of ``"module:attr"`` strings resolved at call time: backends are imported only
when a model needs them (litellm takes ~4.5 s to import), and the engine never imports the
simulated models, which register themselves as one more provider (as inspect_ai's mock model is
just another ``@modelapi`` provider) through the entry point group ``envduels_dagster.providers``
(name = prefix, value = ``module:Class``; this project's own ``envduels-sim`` is declared in
pyproject.toml like any other package's). What a provider offers beyond calls (a skill rank for the
rankings' control, a trainer for the studies) is an optional attribute asked for by name
(:func:`capability`, ``core/models/capabilities.py``), never by the provider's name.

Resolution of ``<prefix>/<model>``: a provider registered for the prefix; else, for any of
litellm's providers, the lean OpenAI-compatible client (``openai``/``hosted_vllm`` with an
``api_base``, see ``ModelEntry.uses_fast_client``); else, for ``LEAN_LITELLM_PROVIDERS``, litellm's formats over
the lean transport (``litellm_lean``); else litellm's ``acompletion`` (also ``client: litellm-full``); else a
clear error.
"""

from __future__ import annotations

import difflib
import importlib
from functools import cache, lru_cache
from importlib.metadata import entry_points
from typing import Any, Protocol


class Routed(Protocol):
    """What routing reads of a registry entry (``core.models.registry.ModelEntry``, which imports this module)."""

    @property
    def uses_fast_client(self) -> bool: ...

    @property
    def client(self) -> str: ...

    @property
    def params(self) -> Any: ...

ENTRY_POINT_GROUP = "envduels_dagster.providers"

# Built-in providers by prefix (none today): the simulated models register through the entry point
# (pyproject.toml), so core never names them. A prefix here wins over a plugin's claim.
PROVIDERS: dict[str, str] = {}

# Backends for litellm's providers, chosen per entry.
LITELLM_BACKEND = "litellm"
LEAN_HTTP_BACKEND = "openai-http"
LITELLM_LEAN_BACKEND = "litellm-lean"
BACKENDS: dict[str, str] = {
    LITELLM_BACKEND: "envduels_dagster.core.models.litellm_backend:LitellmBackend",
    LEAN_HTTP_BACKEND: "envduels_dagster.core.models.http_backend:LeanHTTPBackend",
    LITELLM_LEAN_BACKEND: "envduels_dagster.core.models.litellm_lean:LitellmLeanBackend",
}
# The providers whose calls litellm formats and the lean transport sends (``litellm_lean``, issue 45): each one's
# wire request is compared with litellm's own acompletion in tests/core/models/test_litellm_lean.py. Every other
# litellm provider, and any entry with ``client: litellm-full``, keeps litellm.acompletion. Add one only with a test.
LEAN_LITELLM_PROVIDERS: frozenset[str] = frozenset({"openai", "anthropic"})
# Provider options (the registry's ``params``) whose mapping those tests compare; an entry with any other option
# keeps litellm.acompletion, which maps every option it knows.
VERIFIED_PARAMS: frozenset[str] = frozenset({"top_p", "stop", "presence_penalty", "frequency_penalty",
                                             "reasoning_effort", "thinking", "extra_body"})


def lean_eligible(model: str, params: Any) -> bool:
    """Whether litellm may format and the lean transport send this model's calls (its prefix and ``params``)."""
    return model.split("/", 1)[0] in LEAN_LITELLM_PROVIDERS and set(params or ()) <= VERIFIED_PARAMS

# litellm.provider_list of the pinned litellm (1.110.2), kept here so that checking a model string
# needs no litellm import; tests/core/models/test_model_backends.py asserts it equals the installed litellm's.
LITELLM_PROVIDERS: frozenset[str] = frozenset("""
a2a a2a_agent abliteration ai21 ai21_chat aiand aiml aiohttp_openai amazon_nova anthropic anthropic_text apertis
assemblyai auto_router aws_polly aws_textract azure azure_ai azure_speech azure_text baseten bedrock bedrock_mantle
bespoke bigmodel black_forest_labs bytez cerebras charity_engine chatgpt chutes clarifai clf_ai_gateway cloudflare
codestral cognition cohere cohere_chat cometapi compactifai coralbricks cortecs cursor custom custom_openai
darkbloom dashscope databricks databricks_agent datarobot deepgram deepinfra deepseek docker_model_runner dotprompt
edenai elevenlabs empiriolabs empower eu_jev fal_ai featherless_ai fireworks_ai friendliai galadriel gdc gemini
gigachat github github_copilot gradient_ai groq helicone heroku hosted_vllm hostinger_router huggingface humanloop
hyperbolic inception inferenceapis infinity jina_ai kyma lambda_ai langflow langfuse langgraph laya lemonade
libertai litellm_agent litellm_proxy llamafile lm_studio manus maritalk meta meta_llama microsoft_365_copilot
milvus minimax mistral modelscope mongodb moonshot morph nace nadir nano-gpt nebius neosantara nlp_cloud novita
nscale nvidia_nim nvidia_riva oci ollama ollama_chat oobabooga openai openai_like opencode_go openinfer openrouter
opensearch ovhcloud parallel_ai parasail perplexity petals pg_vector pinstripes poe predibase prism publicai
qwen_ai_platform qwencloud ragflow recraft reducto refuseless reka replicate runwayml s3_vectors sagemaker
sagemaker_chat sagemaker_nova sail sambanova sap scaledown scaleway scx-ai snowflake soniox stability
strands_decider streamlake synthetic tencent tensormesh text-completion-codestral text-completion-inception
text-completion-openai together_ai topaz transcribe triton typesafe v0 valkey vercel_ai_gateway vertex_ai
vertex_ai_beta vllm volcengine voyage wally wandb watsonx watsonx_text xai xiaomi_mimo xinference zai zerogpu
""".split())


class UnknownProviderError(ValueError):
    """No backend serves this model string's prefix."""


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


@lru_cache(maxsize=1)
def _entry_point_providers() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _providers() -> dict[str, str]:
    return {**_entry_point_providers(), **PROVIDERS}  # the built-in table wins over a plugin's claim


def known_prefixes() -> list[str]:
    return sorted(_providers()) + sorted(LITELLM_PROVIDERS - set(_providers()))


def backend_name(model: str, entry: Routed | None = None) -> str:
    """The backend serving ``model`` (a provider prefix, ``openai-http``, ``litellm-lean`` or ``litellm``)."""
    prefix = model.split("/", 1)[0]
    if prefix in _providers():
        return prefix
    if prefix in LITELLM_PROVIDERS:
        if entry is None:
            return LITELLM_BACKEND
        if entry.uses_fast_client:
            return LEAN_HTTP_BACKEND
        if entry.client != "litellm-full" and lean_eligible(model, entry.params):
            return LITELLM_LEAN_BACKEND
        return LITELLM_BACKEND
    close = difflib.get_close_matches(prefix, known_prefixes(), n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise UnknownProviderError(
        f"model {model!r}: no backend for the provider prefix {prefix!r}{hint}; known prefixes: "
        f"{', '.join(sorted(_providers())) or '(no provider plugin installed)'}, and litellm's: "
        f"{', '.join(sorted(LITELLM_PROVIDERS))}; a plugin's prefix exists once its package is installed "
        f"(this project's own: make install)")


@cache
def backend_class(name: str) -> Any:
    """The class registered under ``name``, imported now (the first time only)."""
    target = _providers().get(name) or BACKENDS.get(name)
    if target is None:
        raise UnknownProviderError(f"no backend named {name!r}; known: {', '.join(sorted({**_providers(), **BACKENDS}))}")
    return _load(target)


def check_model_string(model: str) -> None:
    """Raise ``ValueError`` if the provider registered for ``model``'s prefix rejects it (registry load).

    Unknown prefixes pass here on purpose: they fail their own model's calls with a clear
    ``bad_request`` (see ``Gateway.backend``), so one bad entry never stops the other models.
    """
    name = model.split("/", 1)[0]
    if name in _providers():
        check = getattr(backend_class(name), "check_model", None)
        if check is not None:
            check(model)


def capability(model: str, name: str) -> Any:
    """The optional attribute ``name`` of the provider registered for ``model``'s prefix; None when the
    model is not a registered provider's or its provider does not offer it (litellm's never do)."""
    prefix = model.split("/", 1)[0]
    if prefix not in _providers():
        return None
    return getattr(backend_class(prefix), name, None)


def is_simulated(model: str) -> bool:
    """The provider declares itself simulated (the registry's ``simulated`` column)."""
    return bool(capability(model, "simulated"))
