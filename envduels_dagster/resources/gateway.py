"""The model gateway as a resource: registry path and call-cache location are config."""


import dagster as dg

from envduels_dagster.core.models import Gateway, RetryPolicy, open_limiter
from envduels_dagster.core.models.budget import BudgetError, BudgetLedger, open_ledger
from envduels_dagster.core.models.call_cache import open_call_cache
from envduels_dagster.core.models.registry import Registry, load_registry
from envduels_dagster.settings.locations import envduels_home, registry_file
from envduels_dagster.settings.variables import budget_cap, int_value


class GatewayResource(dg.ConfigurableResource):
    """Calls models (simulated in-process, others through litellm) with retries and a persistent cache."""

    registry_path: str
    cache_path: str  # a SQLite file, or a postgresql:// URL (the shared profile's cache)
    max_attempts: int = 5
    timeout_s: float = 60.0
    # Timed-out attempts per call before it gives up; a call waits on the provider at most this x timeout_s
    # (RetryPolicy; issue 33: a hanging provider cost max_attempts x timeout_s).
    max_timeouts: int = 2
    simulated_latency_ms: float = 0.0  # pretend simulated models are remote (demos of concurrency, resume tests)

    def registry(self) -> Registry:
        return load_registry(registry_file(self.registry_path or None))

    def gateway(self, registry: Registry | None = None) -> Gateway:
        """A gateway with the call cache and, when a cap is set, the budget ledger (BudgetError before any call
        when ENVDUELS_BUDGET_USD is not a positive number or a capped model has no price)."""
        registry = registry or self.registry()
        try:
            ledger = self.ledger(registry)
        except BudgetError as exc:  # before any call: the step fails saying why, nothing is written
            raise dg.Failure(f"budget: {exc}; no model was called and nothing was written") from None
        policy = RetryPolicy(max_attempts=self.max_attempts, timeout_s=self.timeout_s, max_timeouts=self.max_timeouts,
                             deadline_factor=float(self.max_timeouts))
        return Gateway(registry, open_call_cache(self.cache_path), policy,
                       sim_latency_s=self.simulated_latency_ms / 1000, ledger=ledger,
                       limiter=open_limiter(self.cache_path),  # provider limits beside the cache: every run
                       litellm_processes=int_value("ENVDUELS_LITELLM_PROCESSES"))  # read in the run's process

    def ledger(self, registry: Registry) -> BudgetLedger | None:
        """The budget ledger beside the call cache, or None when no cap is set (nothing is then recorded)."""
        hold_s = self.max_attempts * (self.timeout_s + 20.0) + 60.0  # a call with every retry and backoff
        return open_ledger(registry, budget_cap(), self.cache_path, envduels_home(), hold_s)
