"""One litellm call, in this process: the code the litellm backend and its worker processes share.

Why a module of its own: ``litellm_backend`` runs this call in the event loop's process or hands it to
``litellm_workers``, whose children run exactly this code; with the call inside ``litellm_backend`` the
backend and the workers imported each other. ``wire_request`` is shared with the lean HTTP backend.
"""

from __future__ import annotations

import dataclasses
import os
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from envduels_dagster.core.models.contract import WIRE_FIELD, to_wire
from envduels_dagster.core.models.errors import MalformedResponse
from envduels_dagster.core.models.types import BackendCall, CallConfig, Completion

if TYPE_CHECKING:
    from envduels_dagster.core.models.registry import ModelEntry


def litellm_module():
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # never download the price map
    import litellm  # slow (~4 s): imported only when a non-simulated model is called

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    from envduels_dagster.core.models.bounded import install_for_litellm

    install_for_litellm()  # replies over max_reply_bytes are refused unread (bounded.py)
    return litellm


@lru_cache(maxsize=256)
def takes_seed(model: str) -> bool:
    """Whether litellm maps a ``seed`` for this model string's provider. Anthropic's API has none: litellm refuses
    a seed there (UnsupportedParamsError, every call a bad_request), so the seed -- still part of the call cache's
    key -- is not sent to such providers (docs/DECISIONS.md)."""
    litellm = litellm_module()
    name, provider, _, _ = litellm.get_llm_provider(model)
    supported = litellm.get_supported_openai_params(model=name, custom_llm_provider=provider)
    return supported is None or "seed" in supported


def wire_request(entry: ModelEntry, call: BackendCall) -> dict[str, Any] | None:
    """The typed request for the body, only for endpoints declared as envduels serve-sim servers."""
    if entry.request_contract and call.request is not None:
        return to_wire(call.request)
    return None


def call_config(entry: ModelEntry, call: BackendCall) -> CallConfig:
    """The call config of one attempt: the gateway's sampling, seed, key and time, the entry's provider options
    and reply cap, and the typed request's wire form (serve-sim endpoints only)."""
    return CallConfig(temperature=call.temperature, max_tokens=call.max_tokens, seed=call.seed,
                      timeout_s=call.timeout_s, params=entry.params, max_reply_bytes=entry.max_reply_bytes,
                      request=wire_request(entry, call), api_key=call.api_key)


def read_model_response(response: Any) -> Completion:
    """The completion a litellm ``ModelResponse`` holds (cost None), or MalformedResponse: shared by
    ``litellm_call`` and ``litellm_lean`` (which parses Anthropic's replies with litellm's own transformation)."""
    try:
        choice = response.choices[0]
        text = choice.message.content
        usage = response.usage
        pt, ct = int(usage.prompt_tokens), int(usage.completion_tokens)
        details = getattr(usage, "completion_tokens_details", None)
        rt = int(getattr(details, "reasoning_tokens", None) or 0)
        finish = getattr(choice, "finish_reason", None)
    except (AttributeError, IndexError, TypeError, ValueError) as exc:
        raise MalformedResponse(f"response lacks content or usage: {exc}") from None
    if not isinstance(text, str):
        raise MalformedResponse("response content is not text")
    return Completion(text, pt, ct, None, max(0, min(rt, ct)), finish if isinstance(finish, str) else None)


async def litellm_call(entry: ModelEntry, messages, config: CallConfig, unpriced: set[str] | None = None,
                       ) -> Completion:
    """One litellm call -> the completion (cost None: priced with the registry's prices).

    Cost: litellm prices every response itself (``_hidden_params["response_cost"]``); we read
    that instead of pricing it a second time. Where the registry gives prices, or litellm's
    price map turned out not to know the model (``unpriced``), we pass explicit per-token
    prices so that litellm skips its price-map search (~1 ms of CPU per call for unknown models).
    ``config.request``: the wire form of the typed request (serve-sim endpoints only), sent as an extra body field.
    ``config.params`` go to litellm as given (provider options: reasoning_effort, thinking, top_p, extra_body);
    ``entry`` gives the model string, the api_base and the prices.
    """
    from envduels_dagster.core.models.bounded import REPLY_CAP

    litellm = litellm_module()
    kwargs: dict[str, Any] = dict(config.params)
    kwargs.update(model=entry.model, messages=messages, temperature=config.temperature,
                  max_tokens=config.max_tokens, timeout=config.timeout_s, max_retries=0)
    registry_priced = bool(entry.input_cost_per_mtok or entry.output_cost_per_mtok)
    if registry_priced or (unpriced is not None and entry.model in unpriced):
        kwargs["input_cost_per_token"] = entry.input_cost_per_mtok / 1e6
        kwargs["output_cost_per_token"] = entry.output_cost_per_mtok / 1e6
    if entry.api_base:
        kwargs["api_base"] = entry.api_base
    if config.api_key:
        kwargs["api_key"] = config.api_key
    elif entry.api_base:
        kwargs["api_key"] = "no-key"  # self-hosted OpenAI-compatible servers (vLLM, Ollama) often need none
    if config.seed is not None and takes_seed(entry.model):
        kwargs["seed"] = config.seed
    if config.request is not None:
        kwargs["extra_body"] = {**(kwargs.get("extra_body") or {}), WIRE_FIELD: config.request}
    box: dict[str, Any] = {"limit": config.max_reply_bytes, "refused": None}
    token = REPLY_CAP.set(box)
    try:
        response = await litellm.acompletion(**kwargs)
    except Exception:
        if box["refused"]:  # the SDK reports our refusal as a connection error: it is a malformed reply
            raise MalformedResponse(box["refused"]) from None
        raise
    finally:
        REPLY_CAP.reset(token)
    reply = read_model_response(response)
    cost = None
    if not registry_priced and "input_cost_per_token" not in kwargs:
        hidden = getattr(response, "_hidden_params", None) or {}
        try:
            cost = hidden.get("response_cost")
            cost = float(cost) if cost is not None else None
        except (TypeError, ValueError, AttributeError):
            cost = None
        if cost is None:  # unknown models have no price; fall back to registry prices (0)
            try:
                cost = float(litellm.completion_cost(completion_response=response))
            except Exception:  # noqa: BLE001
                cost = None
                if unpriced is not None:
                    unpriced.add(entry.model)
    return dataclasses.replace(reply, cost_usd=cost)
