"""One "run process" for the in-flight tests: the gateway a run's steps get (``GatewayResource.gateway()``: the
call cache, the limiter and the in-flight queue beside it), waiting for "go" on stdin, then making its calls at
once; prints one JSON line of what it saw.

``python -m tests.helpers.in_flight_run REGISTRY CACHE_SQLITE CALLS SEED0``
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from envduels_dagster.core.models import LLMError
from envduels_dagster.resources.gateway import GatewayResource

MESSAGES = [{"role": "system", "content": "x"},
            {"role": "user", "content": "Observation: I am thinking of an integer between 1 and 100. Guess it."}]


async def main(registry_path: str, cache: str, calls: int, seed0: int) -> dict:
    # one attempt a call: a 429 (a call past the server's limit) fails it, so the caller sees every excess call
    gateway = GatewayResource(registry_path=registry_path, cache_path=cache, max_attempts=1).gateway()
    await gateway.chat("remote", MESSAGES, seed=10_000 + seed0)  # imports and the first connection, before "go"
    warm = sum(gateway.stats.backend_calls.values())
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    errors: list[str] = []

    async def one(seed: int) -> None:
        try:
            await gateway.chat("remote", MESSAGES, seed=seed)  # distinct seeds: no call cache hit
        except LLMError as exc:
            errors.append(exc.error_class)

    await asyncio.gather(*(one(seed0 + i) for i in range(calls)))
    await gateway.aclose()
    return {"done_at": time.time(), "calls": sum(gateway.stats.backend_calls.values()) - warm, "errors": errors}


if __name__ == "__main__":
    registry_path, cache, calls, seed0 = sys.argv[1:5]
    print(json.dumps(asyncio.run(main(registry_path, cache, int(calls), int(seed0)))), flush=True)
