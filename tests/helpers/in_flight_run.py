"""One "run process" for the in-flight tests: a gateway opened as a run opens it (the limiter beside the call
cache), waiting for "go" on stdin, then making its calls at once; prints one JSON line of what it saw.

``python -m tests.helpers.in_flight_run REGISTRY CACHE_SQLITE CALLS SEED0``
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from envduels_dagster.core.models import Gateway, LLMError, RetryPolicy, open_limiter
from envduels_dagster.core.models.registry import load_registry

MESSAGES = [{"role": "system", "content": "x"},
            {"role": "user", "content": "Observation: I am thinking of an integer between 1 and 100. Guess it."}]


async def main(registry_path: str, cache: str, calls: int, seed0: int) -> dict:
    # no call cache (every call reaches the server); the limiter where a run's would be, beside the cache
    gateway = Gateway(load_registry(registry_path), policy=RetryPolicy(max_attempts=1), limiter=open_limiter(cache))
    await gateway.chat("remote", MESSAGES, seed=10_000 + seed0)  # imports and the first connection, before "go"
    warm = sum(gateway.stats.backend_calls.values())
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    errors: list[str] = []

    async def one(seed: int) -> None:
        try:
            await gateway.chat("remote", MESSAGES, seed=seed)
        except LLMError as exc:
            errors.append(exc.error_class)

    await asyncio.gather(*(one(seed0 + i) for i in range(calls)))
    await gateway.aclose()
    return {"done_at": time.time(), "calls": sum(gateway.stats.backend_calls.values()) - warm, "errors": errors}


if __name__ == "__main__":
    registry_path, cache, calls, seed0 = sys.argv[1:5]
    print(json.dumps(asyncio.run(main(registry_path, cache, int(calls), int(seed0)))), flush=True)
