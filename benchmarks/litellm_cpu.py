"""Benchmark (issue 34): CPU per call of the project's litellm path against litellm's own ``acompletion``.

    .venv/bin/python benchmarks/litellm_cpu.py --calls 400 --concurrency 32 --latency-ms 50 --repeats 3

Starts ``envduels serve-sim`` and, in one process, alternates blocks of ``--calls`` calls at
``--concurrency`` in flight, ``--repeats`` times each (so every variant sees the same load):

* ``litellm.acompletion``: litellm's own call, the minimum (model, messages, api_base, api_key);
* ``project (litellm_call)``: what the gateway's litellm backend sends (temperature, max_tokens,
  timeout, max_retries=0, seed, the typed request as ``extra_body``, and the cost logic);
* ``project, no seed/timeout``: the same minus one argument group, to find which one costs;
* ``litellm formats, lean sends``: the ``client: litellm`` path of openai/anthropic since issue 45
  (core/models/litellm_lean.py: litellm's request and reply formats over fast_client's transport);
* ``lean client (client: fast)``: the OpenAI-compatible lean client, the floor.

``--provider anthropic``: the same against tests/helpers/provider_server.py (the Anthropic Messages API, in its
own process) with ``anthropic/claude-haiku-4-5``: litellm.acompletion, the project's litellm_call, and the new
path (the lean OpenAI client does not speak this API).

Prints CPU milliseconds per call of this process (the server is another process), per variant and
repeat, then ``--profile N`` entries of a cProfile of one project block (cumulative time).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

from servers import sim_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


class AnthropicServer:
    """tests/helpers/provider_server.py in a process of its own (its CPU is not this process's)."""

    def __init__(self, latency_ms: float):
        import subprocess

        self.proc = subprocess.Popen([sys.executable, "-m", "tests.helpers.provider_server", str(latency_ms)],
                                     cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE, text=True)
        self.base = self.proc.stdout.readline().strip()  # type: ignore[union-attr]
        if not self.base.startswith("http://"):
            self.proc.kill()
            raise SystemExit("the Anthropic-format server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", type=int, default=25)
    parser.add_argument("--provider", choices=("openai", "anthropic"), default="openai")
    args = parser.parse_args()

    import os

    from envduels_dagster.core.models.contract import SolveRequest
    from envduels_dagster.core.models.litellm_backend import litellm_call, litellm_module, wire_request
    from envduels_dagster.core.models.registry import ModelEntry
    from envduels_dagster.core.models.types import BackendCall, CallConfig

    litellm = litellm_module()
    if args.provider == "anthropic":
        server = AnthropicServer(args.latency_ms)
        entry = ModelEntry(name="solver-http", model="anthropic/claude-haiku-4-5", api_base=server.base)
    else:
        server = sim_server("--host", "127.0.0.1", "--latency-ms", str(args.latency_ms))
        entry = ModelEntry(name="solver-http", model="openai/journeyman", api_base=server.base,
                           request_contract=True)
    base = server.base
    observation = "I am thinking of an integer between 1 and 100. Guess it."
    messages = [{"role": "system", "content": "You are playing an interactive language game."},
                {"role": "user", "content": f"Observation: {observation}"}]
    request = SolveRequest(env_id="e.r0.0", condition="cold", observation=observation, hint=None, max_turns=10)
    wire = wire_request(entry, BackendCall(messages, 0, entry.temperature, entry.max_tokens, request))
    unpriced: set[str] = set()
    from envduels_dagster.core.models.http_backend import LeanHTTPBackend
    from envduels_dagster.core.models.litellm_lean import LitellmLeanBackend
    from envduels_dagster.core.models.types import BackendOptions

    lean_litellm, lean_http = LitellmLeanBackend(BackendOptions()), LeanHTTPBackend(BackendOptions())

    async def own(i):
        extra = {"extra_body": {"envduels_request": wire}} if entry.request_contract else {}
        await litellm.acompletion(model=entry.model, messages=messages, api_base=base, api_key="no-key", **extra)

    async def project(i):
        seed = i if args.provider == "openai" else None  # litellm takes no seed for Anthropic
        await litellm_call(entry, messages, CallConfig(entry.temperature, entry.max_tokens, seed=seed, timeout_s=60.0,
                                                       request=wire if entry.request_contract else None), unpriced)

    async def project_no_seed_timeout(i):
        no_timeout = CallConfig(entry.temperature, entry.max_tokens, timeout_s=None, request=wire)  # type: ignore[arg-type]
        await litellm_call(entry, messages, no_timeout, unpriced)

    async def formats_lean_sends(i):
        await lean_litellm.complete(entry, BackendCall(messages, i, entry.temperature, entry.max_tokens, request,
                                                       None, 60.0))

    async def lean_client(i):
        await lean_http.complete(entry, BackendCall(messages, i, entry.temperature, entry.max_tokens, request,
                                                    None, 60.0))

    variants = {"litellm.acompletion": own, "project (litellm_call)": project,
                "project, no seed/timeout": project_no_seed_timeout,
                "litellm formats, lean sends": formats_lean_sends, "lean client (client: fast)": lean_client}
    if args.provider == "anthropic":
        variants = {k: variants[k] for k in ("litellm.acompletion", "project (litellm_call)",
                                             "litellm formats, lean sends")}

    async def block(fn) -> float:
        sem = asyncio.Semaphore(args.concurrency)

        async def one(i):
            async with sem:
                await fn(i)

        cpu = time.process_time()
        await asyncio.gather(*(one(i) for i in range(args.calls)))
        return (time.process_time() - cpu) * 1000 / args.calls

    results: dict[str, list[float]] = {k: [] for k in variants}
    try:
        async def run():
            for fn in variants.values():  # warm-up: connections, first-call imports, the price-map miss
                await block(fn)
            for _ in range(args.repeats):
                for name, fn in variants.items():
                    results[name].append(await block(fn))
            profiler = cProfile.Profile()
            profiler.enable()
            await block(project)
            profiler.disable()
            await lean_litellm.aclose()
            await lean_http.aclose()
            return profiler

        load = os.getloadavg()[0]
        profiler = asyncio.run(run())
    finally:
        server.stop()
    print(f"calls={args.calls} concurrency={args.concurrency} latency_ms={args.latency_ms:g} "
          f"litellm={getattr(litellm, 'version', '?')} load1_at_start={load:.1f} load1_at_end={os.getloadavg()[0]:.1f}")
    for name, values in results.items():
        print(f"{name:30s} cpu_ms_per_call: {' '.join(f'{v:.2f}' for v in values)}")
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(args.profile)
    print(out.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
