"""Sandbox limits as a resource, so operators tune them in one place."""


import dagster as dg

from envduels_dagster.core.sandbox import SandboxLimits


class SandboxResource(dg.ConfigurableResource):
    """Limits for the confined worker that runs model-written environment code."""

    step_timeout_s: float = 5.0
    load_timeout_s: float = 10.0
    cpu_seconds: int = 20
    memory_mb: int = 512
    isolate_network: bool = True

    def limits(self) -> SandboxLimits:
        return SandboxLimits(step_timeout_s=self.step_timeout_s, load_timeout_s=self.load_timeout_s,
                             cpu_seconds=self.cpu_seconds, memory_mb=self.memory_mb,
                             isolate_network=self.isolate_network)
