"""What a model call costs at list price, even when the call cache served it.

Why not the response's ``cost_usd``: a cache hit reports 0 (the run spent nothing),
but "what does this author charge per environment" must not change because a run was
resumed. Why ``None`` and never 0 for an unknown price: a model nobody priced is not
free, and a 0 would rank it first on every per-dollar figure.
"""

from __future__ import annotations


def list_cost(prompt_tokens: int, completion_tokens: int, input_cost_per_mtok: float,
              output_cost_per_mtok: float, response_cost_usd: float = 0.0, cached: bool = False) -> float | None:
    """The call's cost in USD, or None if no price is known.

    Registry prices win (they price cache hits too); otherwise litellm's price for a fresh
    call (``response_cost_usd`` > 0); otherwise None. A registry price of 0 means "not set".
    """
    if input_cost_per_mtok > 0 or output_cost_per_mtok > 0:
        return (prompt_tokens * input_cost_per_mtok + completion_tokens * output_cost_per_mtok) / 1e6
    if not cached and response_cost_usd > 0:
        return float(response_cost_usd)
    return None


def usage_fields(gateway, author: str, response) -> dict:
    """``EnvironmentSpec`` authoring-usage fields for one call of ``author`` through ``gateway``.

    Prices come from the gateway's registry entry; a stand-in gateway without a registry (the
    ``ChatGateway`` protocol asks only for ``chat``) records calls and tokens, and no price.
    """
    registry = getattr(gateway, "registry", None)
    entry = registry.get(author) if registry is not None else None
    return {"author_calls": 1, "author_prompt_tokens": int(response.prompt_tokens),
            "author_completion_tokens": int(response.completion_tokens),
            "author_cost_usd": list_cost(response.prompt_tokens, response.completion_tokens,
                                         getattr(entry, "input_cost_per_mtok", 0.0),
                                         getattr(entry, "output_cost_per_mtok", 0.0),
                                         response.cost_usd, response.cached)}
