"""A hand-built warehouse for the author value tests: environments (``env_row``) and episodes (``episode_rows``) whose
learnable seeds are set by hand; ``warehouse()`` gives a cheap author, a pricey one and the learner's own."""

from __future__ import annotations

import pandas as pd

SEEDS = [0, 1, 2, 3]
LEARNER = "learner"


def env_row(author, slot, valid=True, cost=0.01, round_=0, parent=None):
    env_id = f"{author}.r{round_}.{slot}"
    return {"env_id": env_id, "author": author, "round": round_, "domain": "d", "class_name": "C", "max_turns": 5,
            "source": "x", "source_sha256": env_id, "hint": "h", "benchmark_seeds": SEEDS, "valid": valid,
            "reject_reason": None if valid else "broken", "winnability": "proven", "parent_env_id": parent,
            "author_version": "1", "author_meta": "{}", "author_calls": 1, "author_prompt_tokens": 100,
            "author_completion_tokens": 50, "author_cost_usd": cost}


def episode_rows(env_id, author, rescued, solver=LEARNER, cost=0.001):
    """``rescued`` of the 4 seeds fail cold and pass hinted; the others pass cold and hinted."""
    rows = []
    for seed in SEEDS:
        learnable = seed < rescued
        for condition, ok in (("cold", not learnable), ("hinted", True)):
            rows.append({"env_id": env_id, "author": author, "solver": solver, "round": 0, "condition": condition,
                         "seed": seed, "status": "success" if ok else "failure", "stop_reason": "terminated",
                         "model_calls": 2, "cost_usd": cost, "is_self_pair": author == solver})
    return rows


def warehouse(cheap_cost=0.01, pricey_cost=0.10, pricey_priced=True):
    """cheap: 4 valid envs (3 fully learnable, 1 never) + 1 rejected, $cheap_cost each.
    pricey: 4 valid envs, all fully learnable, $pricey_cost each. The learner wrote 2 (all learnable)."""
    envs, eps = [], []
    for slot, rescued in enumerate([4, 4, 4, 0]):
        envs.append(env_row("cheap", slot, cost=cheap_cost))
        eps += episode_rows(f"cheap.r0.{slot}", "cheap", rescued)
    envs.append(env_row("cheap", 4, valid=False, cost=cheap_cost))
    for slot in range(4):
        envs.append(env_row("pricey", slot, cost=pricey_cost if pricey_priced else None))
        eps += episode_rows(f"pricey.r0.{slot}", "pricey", 4)
    for slot in range(2):
        envs.append(env_row(LEARNER, slot, cost=0.001))
        eps += episode_rows(f"{LEARNER}.r0.{slot}", LEARNER, 4)
    return pd.DataFrame(envs), pd.DataFrame(eps)
