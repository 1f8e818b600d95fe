"""The model gateway as a resource: registry path and call-cache location are config."""


import dagster as dg

from envduels_dagster.core.cache import open_call_cache
from envduels_dagster.core.models import Gateway, RetryPolicy, open_limiter
from envduels_dagster.core.registry import Registry, load_registry


class GatewayResource(dg.ConfigurableResource):
    """Calls models (simulated in-process, others through litellm) with retries and a persistent cache."""

    registry_path: str
    cache_path: str  # a SQLite file, or a postgresql:// URL (the shared profile's cache)
    max_attempts: int = 5
    timeout_s: float = 60.0
    simulated_latency_ms: float = 0.0  # pretend simulated models are remote (demos of concurrency, resume tests)

    def registry(self) -> Registry:
        return load_registry(self.registry_path)

    def gateway(self, registry: Registry | None = None) -> Gateway:
        policy = RetryPolicy(max_attempts=self.max_attempts, timeout_s=self.timeout_s)
        # The provider limits beside the cache: one schedule per pool for every run of the instance.
        return Gateway(registry or self.registry(), open_call_cache(self.cache_path), policy,
                       sim_latency_s=self.simulated_latency_ms / 1000, limiter=open_limiter(self.cache_path))
