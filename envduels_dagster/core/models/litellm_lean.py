"""litellm formats, the lean transport sends: real providers' calls without litellm's per-call bookkeeping.

Why: ``litellm.acompletion`` spends ~7-10 ms of CPU a call (the OpenAI SDK, httpx, logging objects, response
metadata), all on the event loop that drives play, so at 500 ms and 64 calls in flight the litellm path was
CPU-bound (docs/BENCHMARKS.md). Here litellm still does what only it knows -- the provider's model and route
(``get_llm_provider``), the parameter mapping (``get_optional_params``), the URL, the headers
(``validate_environment``), the body (``transform_request``), the reply's parsing (``transform_response``; for an
OpenAI-format reply ``fast_client``'s parser, which reads the same fields) and the price (``cost_per_token``,
``completion_cost``) -- and ``fast_client``'s keep-alive transport sends (its reply-size bound, proxies, errors).

Only for ``providers.LEAN_LITELLM_PROVIDERS``, the providers whose wire requests
tests/core/models/test_litellm_lean.py compares with litellm's own ``acompletion`` against a real local server;
only for entries whose ``params`` are all in ``providers.VERIFIED_PARAMS``; and only for models litellm does not
bridge to the Responses API. Every other call keeps ``litellm.acompletion`` (``litellm_call``), as does the
registry's ``client: litellm-full`` (docs/DECISIONS.md). ``litellm_processes`` applies to those calls only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import orjson

from envduels_dagster.core.models.contract import WIRE_FIELD
from envduels_dagster.core.models.litellm_call import call_config, litellm_module, read_model_response, takes_seed
from envduels_dagster.core.models.providers import LEAN_LITELLM_PROVIDERS
from envduels_dagster.core.models.types import REMOTE, BackendCall, BackendError, BackendOptions, CallConfig, Completion

if TYPE_CHECKING:
    from envduels_dagster.core.models.fast_client import FastClient
    from envduels_dagster.core.models.registry import ModelEntry

ANTHROPIC_DEFAULT_BASE = "https://api.anthropic.com/v1/messages"


@dataclass(frozen=True)
class Route:
    """Where one registry entry's calls go. Resolved at its first call in a gateway: litellm's variables
    (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, ...) are read then, not at every call as litellm.acompletion reads them."""

    model: str  # litellm's model name for the provider (the prefix removed)
    provider: str
    api_base: str  # as litellm resolves it
    config: Any  # litellm's provider chat config (BaseConfig)


class _Unlogged:
    """litellm's ``transform_response`` reports to a logging object; this project registers no litellm callbacks."""

    def post_call(self, *args: Any, **kwargs: Any) -> None:
        return None


def resolve_route(entry: ModelEntry) -> Route | None:
    """The entry's route, or None when litellm would not send it as a chat call (a Responses-API model)."""
    litellm = litellm_module()
    from litellm.responses.bridge_check import _resolve_openai_api_base, responses_api_bridge_check
    from litellm.types.utils import LlmProviders
    from litellm.utils import ProviderConfigManager

    model, provider, _, api_base = litellm.get_llm_provider(entry.model, api_base=entry.api_base)
    if provider not in LEAN_LITELLM_PROVIDERS:
        return None
    effort = (entry.params or {}).get("reasoning_effort")
    info, model = responses_api_bridge_check(model=model, custom_llm_provider=provider, api_base=api_base,
                                             reasoning_effort=effort)
    if info.get("mode") == "responses":
        return None
    if provider == "openai":
        base = _resolve_openai_api_base(api_base)
    else:
        from litellm.litellm_core_utils.url_utils import ensure_api_route
        from litellm.secret_managers.main import get_secret_bool, get_secret_str

        base = (api_base or litellm.api_base or get_secret_str("ANTHROPIC_API_BASE")
                or get_secret_str("ANTHROPIC_BASE_URL") or ANTHROPIC_DEFAULT_BASE)
        if not get_secret_bool("LITELLM_ANTHROPIC_DISABLE_URL_SUFFIX"):
            base = ensure_api_route(base, "v1/messages")
    config = ProviderConfigManager.get_provider_chat_config(model=model, provider=LlmProviders(provider))
    if config is None:
        return None
    return Route(model, provider, base, config)


def _api_key(route: Route, entry: ModelEntry, config: CallConfig) -> str | None:
    """The key as litellm picks it: the registry's, else litellm's module setting or the provider's variable."""
    import litellm

    key = config.api_key or ("no-key" if entry.api_base else None)
    if route.provider == "openai":
        return key or litellm.api_key or litellm.openai_key or os.environ.get("OPENAI_API_KEY")
    return key or litellm.anthropic_key or litellm.api_key or os.environ.get("ANTHROPIC_API_KEY")


@dataclass
class Wire:
    """One request as litellm formats it: where, the headers (with the key), the body, and what parsing needs."""

    url: str
    headers: dict[str, str]
    body: dict[str, Any]
    messages: list[Any]
    optional_params: dict[str, Any]
    api_key: str | None

    def __repr__(self) -> str:  # a logged request never shows the key
        return f"Wire(url={self.url!r}, body keys={sorted(self.body)})"


def format_request(route: Route, entry: ModelEntry, messages: list[dict[str, Any]], config: CallConfig) -> Wire:
    """The request litellm.acompletion would send for this call (tests compare the two on the wire)."""
    import litellm

    params = dict(config.params)
    if config.request is not None:
        params["extra_body"] = {**(params.get("extra_body") or {}), WIRE_FIELD: config.request}
    copied: Any = [dict(m) for m in messages]  # the provider's transformation may rewrite them in place
    # in litellm.completion's order: the roles translated, then the options mapped, then the request formatted
    messages = translated = list(route.config.translate_developer_role_to_system_role(
        messages=copied, model=route.model, custom_llm_provider=route.provider, api_base=entry.api_base,
        model_info=None))
    optional = litellm.get_optional_params(model=route.model, custom_llm_provider=route.provider,
                                           temperature=config.temperature, max_tokens=config.max_tokens,
                                           seed=config.seed if takes_seed(entry.model) else None,
                                           messages=translated, stream=None, **params)
    key = _api_key(route, entry, config)
    litellm_params = {"api_base": route.api_base}
    if route.provider == "openai":
        if key is None:
            raise BackendError("auth_error", None, f"model {entry.model!r}: no API key for OpenAI (set the "
                               "registry's api_key_env, or OPENAI_API_KEY)")
        headers = route.config.validate_environment(headers={}, model=route.model, messages=messages,
                                                    optional_params=optional, litellm_params=litellm_params,
                                                    api_key=key, api_base=route.api_base)
        url = route.config.get_complete_url(route.api_base, key, route.model, optional, litellm_params)
        data = route.config.transform_request(route.model, messages, dict(optional), litellm_params, headers)
        # what the OpenAI SDK does with its request options: extra_body merged into the body, the rest dropped
        extra = data.pop("extra_body", None) or {}
        data.pop("extra_headers", None)
        data.pop("extra_query", None)
        data.update(extra)
        return Wire(url, _text(headers), data, messages, optional, key)
    from litellm.anthropic_beta_gated_fields import strip_beta_gated_request_body
    from litellm.anthropic_beta_headers_manager import update_request_with_filtered_beta

    transform_params = {**optional, "is_vertex_request": False}
    headers = route.config.validate_environment(api_key=key, headers={}, model=route.model, messages=messages,
                                                optional_params=dict(transform_params),
                                                litellm_params=litellm_params, api_base=route.api_base)
    data = route.config.transform_request(model=route.model, messages=messages, optional_params=transform_params,
                                          litellm_params=litellm_params, headers=headers)
    headers, data = update_request_with_filtered_beta(headers=headers, request_data=data, provider=route.provider,
                                                      api_base=route.api_base)
    data = dict(strip_beta_gated_request_body(data, headers, drop_params=None, model=route.model,
                                              provider=route.provider))
    return Wire(route.api_base, _text(headers), data, messages, optional, key)


def _text(headers: dict[str, Any]) -> dict[str, str]:
    """Header values as text (as httpx sends them), unset ones left out."""
    return {str(name): str(value) for name, value in headers.items() if value is not None}


def parse_reply(route: Route, wire: Wire, status: int, headers: dict[str, str], raw: bytes) -> tuple[Completion, Any]:
    """(the completion, litellm's usage or response for pricing) from a reply; raises what the status means."""
    from envduels_dagster.core.models.fast_client import reply_completion, reply_json

    data = reply_json(status, headers.get("retry-after"), raw)  # HTTPStatusError, MalformedBody
    if route.provider == "openai":
        from litellm.litellm_core_utils.core_helpers import map_finish_reason

        done = reply_completion(data)  # litellm's Choices map a finish reason (None: "stop", vLLM's "eos": "stop")
        finish = map_finish_reason(done.finish_reason) if done.finish_reason is not None else "stop"
        return replace(done, finish_reason=finish), data.get("usage")
    import httpx
    import litellm

    response = route.config.transform_response(
        model=route.model, raw_response=httpx.Response(status, content=raw, headers=headers),
        model_response=litellm.ModelResponse(), logging_obj=_Unlogged(), request_data=wire.body,
        messages=wire.messages, optional_params=wire.optional_params, litellm_params={}, encoding=None,
        api_key=wire.api_key, json_mode=wire.optional_params.get("json_mode"))
    return read_model_response(response), response


def price(route: Route, priced_by: Any) -> float | None:
    """litellm's price of a reply (its price map), or None when the map does not know the model."""
    import litellm

    try:
        if route.provider == "openai":
            usage = litellm.Usage(**priced_by) if isinstance(priced_by, dict) else None
            if usage is None:
                return None
            prompt, completion = litellm.cost_per_token(model=route.model, custom_llm_provider=route.provider,
                                                        usage_object=usage, prompt_tokens=usage.prompt_tokens,
                                                        completion_tokens=usage.completion_tokens)
            return float(prompt + completion)
        return float(litellm.completion_cost(completion_response=priced_by, model=route.model,
                                             custom_llm_provider=route.provider))
    except Exception:  # noqa: BLE001 - litellm raises plain exceptions for models its map lacks
        return None


class LitellmLeanBackend:
    """litellm's request and reply formats over ``fast_client``'s transport (``LEAN_LITELLM_PROVIDERS`` only)."""

    simulated = False
    traits = REMOTE

    def __init__(self, options: BackendOptions):
        self._client: FastClient | None = None
        self._routes: dict[tuple[str, str | None, str], Route | None] = {}
        self._unpriced: set[str] = set()

    def route(self, entry: ModelEntry) -> Route | None:
        key = (entry.model, entry.api_base, repr((entry.params or {}).get("reasoning_effort")))  # what routes it
        if key not in self._routes:
            self._routes[key] = resolve_route(entry)
        return self._routes[key]

    async def complete(self, entry: ModelEntry, call: BackendCall) -> Completion:
        config = call_config(entry, call)
        route = self.route(entry)
        if route is None:  # litellm would bridge it to the Responses API: its own path
            from envduels_dagster.core.models.litellm_call import litellm_call

            return await litellm_call(entry, call.messages, config, self._unpriced)
        wire = format_request(route, entry, call.messages, config)
        if self._client is None:
            from envduels_dagster.core.models.fast_client import FastClient

            self._client = FastClient()
        status, headers, raw = await self._client.post(wire.url, wire.headers, orjson.dumps(wire.body),
                                                       config.max_reply_bytes, config.timeout_s)
        done, priced_by = parse_reply(route, wire, status, headers, raw)
        if entry.input_cost_per_mtok or entry.output_cost_per_mtok or entry.model in self._unpriced:
            return done  # the registry's prices (cost None)
        cost = price(route, priced_by)
        if cost is None:
            self._unpriced.add(entry.model)
            return done
        return Completion(done.text, done.prompt_tokens, done.completion_tokens, cost, done.reasoning_tokens,
                          done.finish_reason)

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()
