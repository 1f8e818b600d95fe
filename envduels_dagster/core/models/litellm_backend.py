"""The litellm backend: every provider litellm knows, called with ``max_retries=0``.

Why ``max_retries=0`` and no litellm cache: the gateway's own retry loop decides attempts,
backoff and error classes (deterministic and recorded), and its own cache keys the calls.
litellm is imported lazily (~4.5 s) with the local price map (importing it otherwise tries
to download one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

# The call itself lives in litellm_call (shared with the worker processes); its names stay importable here.
from envduels_dagster.core.models.litellm_call import call_config, litellm_call, litellm_module, wire_request
from envduels_dagster.core.models.types import REMOTE, BackendCall, BackendOptions, BackendTraits, Completion

if TYPE_CHECKING:
    from envduels_dagster.core.models.litellm_workers import LitellmWorkers
    from envduels_dagster.core.models.registry import ModelEntry

__all__ = ["LitellmBackend", "call_config", "litellm_call", "litellm_module", "wire_request"]


class LitellmBackend:
    """litellm in this process, or in ``options.litellm_processes`` worker processes."""

    simulated: ClassVar[bool] = False
    traits: ClassVar[BackendTraits] = REMOTE

    def __init__(self, options: BackendOptions):
        self.processes = max(0, options.litellm_processes)
        self._workers: LitellmWorkers | None = None
        self._unpriced: set[str] = set()  # litellm model strings its price map does not know

    def workers(self) -> LitellmWorkers:
        """The worker processes (started on their first call)."""
        if self._workers is None:
            from envduels_dagster.core.models.litellm_workers import LitellmWorkers

            self._workers = LitellmWorkers(max(1, self.processes))
        return self._workers

    async def complete(self, entry: ModelEntry, call: BackendCall) -> Completion:
        config = call_config(entry, call)
        if self.processes:
            return await self.workers().call(entry, call.messages, config)
        return await litellm_call(entry, call.messages, config, self._unpriced)

    async def aclose(self) -> None:
        if self._workers is not None:
            workers, self._workers = self._workers, None
            await workers.aclose()
