"""The gateway resource gives the engine the settings it no longer reads itself (issue 47): the registry file
(ENVDUELS_REGISTRY), litellm's worker processes (ENVDUELS_LITELLM_PROCESSES) and the overall spending cap
(ENVDUELS_BUDGET_USD), each read in the process that runs the step (a run's worker inherits the variables)."""

from __future__ import annotations

import asyncio

import dagster as dg
import pytest

from envduels_dagster.core.models import Gateway
from envduels_dagster.core.models.registry import load_registry
from envduels_dagster.resources.paths import HomeGatewayResource


def test_a_run_s_gateway_is_given_the_variables_the_engine_does_not_read(envduels_home, sim_registry, monkeypatch):
    path = sim_registry(["oracle", "novice"])
    monkeypatch.setenv("ENVDUELS_REGISTRY", str(path))
    monkeypatch.setenv("ENVDUELS_LITELLM_PROCESSES", "2")
    monkeypatch.setenv("ENVDUELS_BUDGET_USD", "7.5")
    gateway = HomeGatewayResource().gateway()
    try:
        assert gateway.registry.names == ["oracle", "novice"] and gateway.registry.path == str(path)
        assert gateway.litellm_processes == 2
        assert gateway.ledger is not None and gateway.ledger.caps.total == 7.5
        assert gateway.ledger.path == envduels_home / "cache" / "budget.sqlite"
    finally:
        gateway.ledger.close()
        asyncio.run(gateway.aclose())
    engine = Gateway(load_registry(path))  # the engine itself: only what it is given
    assert engine.litellm_processes == 0 and engine.ledger is None


def test_a_bad_cap_fails_the_step_before_any_call_and_writes_no_ledger(envduels_home, sim_registry, monkeypatch):
    monkeypatch.setenv("ENVDUELS_REGISTRY", str(sim_registry(["oracle"])))
    monkeypatch.setenv("ENVDUELS_BUDGET_USD", " -3")
    with pytest.raises(dg.Failure) as info:
        HomeGatewayResource().gateway()
    assert str(info.value.description).startswith("budget: ENVDUELS_BUDGET_USD='-3' cannot be used: a budget must be "
                                                  "a positive, finite amount in US dollars")
    assert not (envduels_home / "cache" / "budget.sqlite").exists()
