"""The spending cap (core/models/budget.py): checked before every paid call, held across processes, refused when unusable."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from envduels_dagster.core.models import Gateway
from envduels_dagster.core.models.budget import (
    BudgetError,
    BudgetExhausted,
    BudgetLedger,
    Caps,
    caps_for,
    ledger_path_for,
    parse_budget,
)
from envduels_dagster.core.models.call_cache import CallCache
from envduels_dagster.core.models.registry import load_registry

# A simulated model priced so that a few calls reach a cap: worst case per call ~ (40 + 64) tokens x $1000/Mtok.
PRICED = """models:
  - name: pricey
    model: envduels-sim/expert
    max_tokens: 64
    input_cost_per_mtok: 1000
    output_cost_per_mtok: 1000
{extra}"""


def _registry(tmp_path: Path, extra: str = "", budget: str = "") -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(PRICED.format(extra=extra).replace("    max_tokens: 64\n", "    max_tokens: 64\n" + budget))
    return path


async def _calls(gw: Gateway, model: str, n: int, tag: str) -> tuple[int, str | None]:
    """Make up to ``n`` distinct calls; return how many were made and the refusal's message, if any."""
    made = 0
    try:
        for i in range(n):
            await gw.chat(model, [{"role": "user", "content": f"{tag} call {i}: reply with \\boxed{{1}}"}], seed=i)
            made += 1
    except BudgetExhausted as exc:
        return made, str(exc)
    finally:
        await gw.aclose()
    return made, None


@pytest.mark.parametrize("text, expected", [
    ("abc", "ENVDUELS_BUDGET_USD='abc' is not a number: give a positive amount in US dollars"),
    ("-5", "ENVDUELS_BUDGET_USD='-5' cannot be used: a budget must be a positive, finite amount"),
    ("0", "ENVDUELS_BUDGET_USD='0' cannot be used"),
    ("nan", "ENVDUELS_BUDGET_USD='nan' cannot be used"),
    ("inf", "ENVDUELS_BUDGET_USD='inf' cannot be used"),
    ("$5", "ENVDUELS_BUDGET_USD='$5' is not a number"),
])
def test_unusable_overall_budgets_are_refused_with_the_value_named(text, expected):
    with pytest.raises(BudgetError) as err:
        parse_budget(text)
    assert expected in str(err.value)


def test_blank_or_unset_overall_budget_means_no_cap():
    assert parse_budget(None) is None and parse_budget("  ") is None
    assert parse_budget(" 2.50 ") == 2.5


def test_a_cap_on_a_model_without_a_price_is_refused_before_anything_runs(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - name: remote\n    model: openai/gpt-x\n    api_base: http://127.0.0.1:9/v1\n"
                    "    budget_usd: 5\n  - name: sim\n    model: envduels-sim/novice\n")
    registry = load_registry(path)
    with pytest.raises(BudgetError, match=r"remote have no price, so its budget_usd cannot be enforced: set "
                                          r"input_cost_per_mtok and output_cost_per_mtok"):
        caps_for(registry, None)
    with pytest.raises(BudgetError, match="ENVDUELS_BUDGET_USD and budget_usd cannot be enforced"):
        caps_for(registry, 10.0)
    # an unpriced simulated model is free: an overall cap does not need its price
    sim_only = tmp_path / "sim.yaml"
    sim_only.write_text("models:\n  - name: sim\n    model: envduels-sim/novice\n")
    assert caps_for(load_registry(sim_only), 10.0) == Caps({}, 10.0)


def test_spending_stops_at_a_model_cap_and_the_refused_call_is_neither_made_nor_cached(tmp_path):
    registry = load_registry(_registry(tmp_path, budget="    budget_usd: 0.5\n"))
    ledger = BudgetLedger(tmp_path / "budget.sqlite", caps_for(registry, None))
    cache = CallCache(tmp_path / "calls.sqlite")
    gw = Gateway(registry, cache, ledger=ledger)
    made, refusal = asyncio.run(_calls(gw, "pricey", 100, "a"))
    spent = ledger.spent()["pricey"]
    assert 0 < made < 100 and spent["calls"] == made == gw.stats.backend_calls["pricey"] == len(cache)
    assert spent["usd"] <= 0.5
    assert refusal is not None and "stopped_at_budget" in refusal and "model 'pricey''s budget_usd of $0.5" in refusal
    assert "left, the next call" in refusal and "raise its budget_usd and re-run" in refusal
    # nothing is held after the refusal: reservations were settled or released
    held = ledger._conn().execute("SELECT count(*) FROM spend WHERE state = 'reserved'").fetchone()[0]
    assert held == 0


def test_raising_the_cap_continues_from_the_cache_without_paying_twice(tmp_path):
    registry = load_registry(_registry(tmp_path, budget="    budget_usd: 0.5\n"))
    cache = CallCache(tmp_path / "calls.sqlite")
    first = BudgetLedger(tmp_path / "budget.sqlite", caps_for(registry, None))
    made, _ = asyncio.run(_calls(Gateway(registry, cache, ledger=first), "pricey", 100, "a"))
    raised = BudgetLedger(tmp_path / "budget.sqlite", Caps({"pricey": 100.0}, None))
    gw = Gateway(registry, cache, ledger=raised)
    again, refusal = asyncio.run(_calls(gw, "pricey", made + 3, "a"))
    assert refusal is None and again == made + 3
    assert gw.stats.cache_hits["pricey"] == made and gw.stats.backend_calls["pricey"] == 3
    assert raised.spent()["pricey"]["calls"] == made + 3  # the ledger paid each call once


def test_the_overall_cap_counts_every_model(tmp_path):
    registry = load_registry(_registry(tmp_path, extra="  - name: other\n    model: envduels-sim/novice\n"
                                                       "    max_tokens: 64\n    input_cost_per_mtok: 1000\n"
                                                       "    output_cost_per_mtok: 1000\n"))
    ledger = BudgetLedger(tmp_path / "budget.sqlite", caps_for(registry, 0.6))
    made_a, _ = asyncio.run(_calls(Gateway(registry, None, ledger=ledger), "pricey", 3, "a"))
    made_b, refusal = asyncio.run(_calls(Gateway(registry, None, ledger=ledger), "other", 100, "b"))
    assert made_a == 3 and 0 < made_b < 100
    assert "the overall ENVDUELS_BUDGET_USD of $0.6 would be passed" in (refusal or "")
    assert sum(v["usd"] for v in ledger.spent().values()) <= 0.6


def test_the_ledger_sits_beside_the_call_cache(tmp_path):
    assert ledger_path_for(str(tmp_path / "cache" / "calls.sqlite")) == tmp_path / "cache" / "budget.sqlite"
    assert ledger_path_for("postgresql://u@h/db", tmp_path) == tmp_path / "cache" / "budget.sqlite"


WORKER = """
import asyncio, json, sys, time
from pathlib import Path
from envduels_dagster.core.models.budget import BudgetExhausted, BudgetLedger, caps_for
from envduels_dagster.core.models import Gateway
from envduels_dagster.core.models.registry import load_registry
registry_path, ledger_path, tag, barrier = sys.argv[1:5]
registry = load_registry(registry_path)
ledger = BudgetLedger(ledger_path, caps_for(registry, None))
gw = Gateway(registry, None, ledger=ledger, sim_latency_s=0.01)  # calls in flight overlap across processes
Path(barrier, tag).touch()
while len(list(Path(barrier).iterdir())) < 2:  # both processes start spending together
    time.sleep(0.01)
async def lane(lane_no):
    made = 0
    try:
        for i in range(10_000):
            await gw.chat("pricey", [{"role": "user", "content": f"{tag} {lane_no} {i}"}], seed=i)
            made += 1
    except BudgetExhausted:
        return made, True
    return made, False
async def main():
    return await asyncio.gather(*(lane(n) for n in range(4)))
lanes = asyncio.run(main())
print(json.dumps({"made": sum(m for m, _ in lanes), "refused": all(r for _, r in lanes)}))
"""


def test_the_cap_holds_when_two_processes_spend_at_once(tmp_path):
    registry = _registry(tmp_path, budget="    budget_usd: 3\n")
    ledger = tmp_path / "budget.sqlite"
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(registry), str(ledger), tag, str(barrier)],
                              stdout=subprocess.PIPE, text=True) for tag in ("first", "second")]
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    spent = BudgetLedger(ledger, Caps()).spent()["pricey"]
    assert all(o["refused"] and o["made"] > 0 for o in outs)  # both spent, and both were stopped by the cap ...
    assert spent["calls"] == sum(o["made"] for o in outs)  # ... every call made was recorded once ...
    assert spent["usd"] <= 3.0  # ... and together they never passed it
    worst = 1000 * (64 + 40) / 1e6
    assert spent["usd"] > 3.0 - 2 * worst  # and spending went right up to it (no process stopped early)
