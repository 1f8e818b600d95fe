"""Backends declare what they need (a key, retries, imitated latency); the gateway reads that and never asks
whether a backend is the simulated one."""

from __future__ import annotations

import asyncio
import inspect
from typing import ClassVar

import pytest

from envduels_dagster.core.models import BackendError, Completion, Gateway, LLMError, RetryPolicy, gateway, providers
from envduels_dagster.core.models.registry import RegistryError, load_registry
from envduels_dagster.core.models.types import BackendTraits

MESSAGES = [{"role": "user", "content": "hi"}]


class FlakyBackend:
    """Fails its first two attempts of each call as a remote provider would; needs no key."""

    simulated: ClassVar[bool] = False
    traits: ClassVar[BackendTraits] = BackendTraits(needs_key=False, retries=True)
    failures = 2

    def __init__(self, options):
        self.seen: list = []

    async def complete(self, entry, call):
        self.seen.append(call.api_key)
        if len(self.seen) <= self.failures:
            raise BackendError("server_error", None, "try again")
        return Completion("ok", 1, 1, finish_reason="stop")

    async def aclose(self):
        return None


class KeyedOnceBackend(FlakyBackend):
    """Needs its key; one attempt only (no retries)."""

    traits: ClassVar[BackendTraits] = BackendTraits(needs_key=True, retries=False)


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(providers.PROVIDERS, "flaky", f"{__name__}:FlakyBackend")
    monkeypatch.setitem(providers.PROVIDERS, "keyed", f"{__name__}:KeyedOnceBackend")
    providers.backend_class.cache_clear()
    yield
    providers.backend_class.cache_clear()


def registry(tmp_path, model: str, extra: str = ""):
    path = tmp_path / "models.yaml"
    path.write_text(f"models:\n  - name: m\n    model: {model}\n    api_key_env: ENVDUELS_TRAITS_KEY\n{extra}")
    return load_registry(path)


def test_a_backend_without_a_key_is_retried_and_never_reads_the_variable(registered, tmp_path, monkeypatch):
    monkeypatch.delenv("ENVDUELS_TRAITS_KEY", raising=False)  # unset: a keyed backend would fail here
    gw = Gateway(registry(tmp_path, "flaky/x"), policy=RetryPolicy(base_delay_s=0.001))
    reply = asyncio.run(gw.chat("m", MESSAGES))
    assert (reply.text, reply.attempts, reply.retried_errors) == ("ok", 3, ["server_error", "server_error"])
    assert gw.backend(gw.registry.get("m")).seen == [None, None, None]


def test_a_keyed_backend_without_retries_gets_its_key_and_one_attempt(registered, tmp_path, monkeypatch):
    gw = Gateway(registry(tmp_path, "keyed/x"), policy=RetryPolicy(base_delay_s=0.001))
    with pytest.raises(RegistryError, match="environment variable ENVDUELS_TRAITS_KEY is not set"):
        asyncio.run(gw.chat("m", MESSAGES))
    monkeypatch.setenv("ENVDUELS_TRAITS_KEY", "k-123")
    with pytest.raises(LLMError) as exc:
        asyncio.run(gw.chat("m", MESSAGES))
    assert exc.value.attempts == 1 and exc.value.error_class == "server_error"
    assert gw.backend(gw.registry.get("m")).seen == ["k-123"]


def test_the_gateway_has_no_path_of_its_own_for_simulated_models():
    source = inspect.getsource(gateway)
    assert ".simulated" not in source and "is_simulated" not in source
    from envduels_dagster.sim.provider import SimBackend

    assert SimBackend.traits == BackendTraits(needs_key=False, retries=False, imitates_latency=True)
