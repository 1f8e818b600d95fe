"""Benchmark: episode throughput through the real gateway against ``envduels serve-sim``.

    .venv/bin/python benchmarks/throughput.py --latency-ms 50 --episodes 640 --concurrency 64 --backend fast
    .venv/bin/python benchmarks/throughput.py --latency-ms 500 --episodes 640 --concurrency 64 --backend litellm
    .venv/bin/python benchmarks/throughput.py --latency-ms 500 --episodes 640 --concurrency 64 --backend litellm-full

Starts ``envduels serve-sim --latency-ms L`` on 127.0.0.1 (a separate process), has one simulated
author write environments in-process (setup, not timed), then plays E episodes of them with an
HTTP-served simulated solver through ``Gateway`` + ``play_pair`` (the code the ``duel_episodes``
asset runs), at most C episodes and C model calls in flight, with the call cache on as in the
pipeline. Prints the setup, ``cpu_ms_per_call=Y`` (this process's CPU time during the timed
section divided by the model calls made; the server and sandbox workers are other processes) and,
as its last line, ``ratio=X`` = wall time / (model calls x L / C), the latency bound.

``--backend`` is the solver entry's registry ``client``: ``fast`` the lean OpenAI-compatible client, ``litellm``
litellm's formats over the lean transport (core/models/litellm_lean.py; the default for openai/anthropic since
issue 45: the served solver is openai-format, so this is the openai provider's path), ``litellm-full``
``litellm.acompletion`` (what ``--backend litellm`` measured before issue 45).

Use E a multiple of C so that wave quantization does not dominate. Goals on 2 cores: litellm at
L=500, C=64, E=640 ratio <= 1.10; the lean path at L=50, C=64, E=640 ratio <= 1.5 and
cpu_ms_per_call <= 1.5. Every episode starts its own sandbox worker (sandbox reuse was removed:
docs/DECISIONS.md); ``--profile FILE`` records the timed section with py-spy.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from servers import sim_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _proc_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a live process has used so far, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def write_registry(path: Path, base: str, solver: str, author: str, backend: str, concurrency: int) -> None:
    path.write_text(f"""models:
  - name: {author}
    model: envduels-sim/{author}
  - name: solver-http
    model: openai/{solver}
    api_base: {base}
    client: {backend}
    request_contract: true
    max_concurrency: {concurrency}
""")


async def author_specs(gateway, author: str, count: int):
    from envduels_dagster.core.authoring.prompts import author_environments

    return [s for s in await author_environments(gateway, author, count, [0, 1, 2, 3]) if s.valid]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--episodes", type=int, default=640)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--backend", choices=("fast", "litellm", "litellm-full"), default="fast",
                        help="the solver's registry client (see above)")
    parser.add_argument("--solver", default="journeyman", help="simulated profile that plays (served over HTTP)")
    parser.add_argument("--author", default="expert", help="simulated profile that writes the environments")
    parser.add_argument("--envs", type=int, default=10, help="environments the episodes are spread over")
    parser.add_argument("--litellm-processes", type=int, default=0,
                        help="run litellm calls in N worker processes (Gateway(litellm_processes=N)); 0: in-process")
    parser.add_argument("--http", choices=("h1", "aiohttp"), default="h1",
                        help="lean path transport: httptools HTTP/1.1 pool (default) or aiohttp (before)")
    parser.add_argument("--no-cache", action="store_true", help="no call cache (the pipeline always has one)")
    parser.add_argument("--profile", help="record the timed section with py-spy (.svg flamegraph, .json speedscope, .txt collapsed stacks)")
    args = parser.parse_args()
    if args.episodes % args.concurrency:
        print(f"warning: E={args.episodes} is not a multiple of C={args.concurrency}", file=sys.stderr)

    from envduels_dagster.core.models import fast_client
    from envduels_dagster.core.models.call_cache import CallCache

    if args.http == "aiohttp":
        fast_client._httptools_available = lambda: False
    from envduels_dagster.core.models import Gateway, RetryPolicy
    from envduels_dagster.core.models.registry import load_registry
    from envduels_dagster.core.play.episode import PlayConfig, play_pair

    workdir = Path(tempfile.mkdtemp(prefix="envduels-throughput-"))
    server = sim_server("--host", "127.0.0.1", "--latency-ms", str(args.latency_ms))
    base = server.base
    spy = None
    try:
        registry_file = workdir / "models.yaml"
        write_registry(registry_file, base, args.solver, args.author, args.backend, args.concurrency)
        registry = load_registry(registry_file)

        t_setup = time.perf_counter()
        specs = asyncio.run(author_specs(Gateway(registry), args.author, args.envs * 2))[: args.envs]
        if not specs:
            raise SystemExit("the author wrote no valid environment")
        # E episodes = envs x seeds x {cold, hinted}: spread seeds over the environments.
        per_env = [args.episodes // 2 // len(specs) + (i < (args.episodes // 2) % len(specs))
                   for i in range(len(specs))]
        seed0 = 0
        for spec, n in zip(specs, per_env):
            spec.benchmark_seeds = list(range(seed0, seed0 + n))
            seed0 += n
        specs = [s for s in specs if s.benchmark_seeds]
        warmup = None
        if args.backend == "litellm":
            from envduels_dagster.core.models.litellm_lean import resolve_route

            resolve_route(registry.get("solver-http"))  # litellm's import and its route look-up: once per process
        elif args.backend == "litellm-full" and not args.litellm_processes:
            from envduels_dagster.core.models.litellm_backend import litellm_module

            litellm_module()  # import cost (~4 s) is a one-off per process, not per call
        elif args.backend == "litellm-full":
            warmup = args.litellm_processes  # start the worker processes (they import litellm) before timing
        setup_s = time.perf_counter() - t_setup

        cache = None if args.no_cache else CallCache(workdir / "calls.sqlite")
        gateway = Gateway(registry, cache, RetryPolicy(max_attempts=5, timeout_s=60.0),
                          litellm_processes=args.litellm_processes)

        timing: dict[str, float] = {}

        async def run():
            if warmup:  # start the litellm worker processes (each imports litellm, ~4 s) before timing
                await gateway.backend(registry.get("solver-http")).workers()._ensure(0)
            timing["load0"] = os.getloadavg()[0]
            timing["server0"] = _proc_cpu_s(server.pid)
            timing["cpu0"], timing["t0"] = time.process_time(), time.perf_counter()
            try:
                return await play_pair(gateway, "solver-http", specs, PlayConfig(concurrency=args.concurrency))
            finally:
                timing["wall"] = time.perf_counter() - timing["t0"]
                timing["cpu"] = time.process_time() - timing["cpu0"]
                workers = getattr(gateway._backends.get("litellm"), "_workers", None)
                timing["workers_cpu"] = sum(_proc_cpu_s(p.pid) for p in (workers._procs if workers else []) if p)
                await gateway.aclose()

        if args.profile:
            fmt = {".json": "speedscope", ".txt": "raw"}.get(Path(args.profile).suffix, "flamegraph")
            py_spy = Path(sys.executable).with_name("py-spy")  # pip install py-spy (not a dependency)
            spy = subprocess.Popen([str(py_spy) if py_spy.exists() else "py-spy", "record", "-o", args.profile,
                                    "-r", "200", "--gil", "-p", str(os.getpid()), "--format", fmt],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)
        from envduels_dagster.core import sandbox as sandbox_module

        starts = [0]
        original_start = sandbox_module.SandboxedEnv.start

        async def counting_start(self):
            starts[0] += 1
            return await original_start(self)

        sandbox_module.SandboxedEnv.start = counting_start  # count worker starts (benchmark only)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        children0 = usage.ru_utime + usage.ru_stime
        records = asyncio.run(run())
        wall, cpu, load0, server_cpu0 = timing["wall"], timing["cpu"], timing["load0"], timing["server0"]
        if spy is not None:
            spy.send_signal(2)
            spy.wait(timeout=60)
        server_cpu = _proc_cpu_s(server.pid)
        server_total_cpu = server_cpu
    finally:
        server.stop()
    from envduels_dagster.core.sandbox import shutdown_fork_server

    shutdown_fork_server()  # reaps the fork server, whose rusage holds its workers'
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    sandbox_cpu = children.ru_utime + children.ru_stime - children0 - server_total_cpu - timing.get("workers_cpu", 0.0)

    calls = sum(r.model_calls for r in records)
    statuses = {s: sum(r.status == s for r in records) for s in ("success", "failure", "incomplete")}
    from collections import Counter

    errors = Counter(re.sub(r"\d+(\.\d+)?", "N", str(r.error))[:160] for r in records if r.status == "incomplete")
    for error, n in errors.most_common(5):  # why episodes ended incomplete (numbers blanked)
        print(f"incomplete x{n}: {error}")
    bound = calls * args.latency_ms / 1000 / args.concurrency
    print(f"backend={args.backend}{f' ({args.http})' if args.backend == 'fast' else ''} latency_ms={args.latency_ms:g} concurrency={args.concurrency} "
          f"episodes={len(records)} envs={len(specs)} solver={args.solver} cache={'off' if args.no_cache else 'on'}")
    print(f"sandbox workers started={starts[0]} (one per episode)")
    print(f"setup (authoring + validation{', litellm import' if args.backend != 'fast' else ''}): {setup_s:.1f}s")
    print(f"statuses: {statuses}  retries={sum(r.retries for r in records)}")
    print(f"model_calls={calls} wall_s={wall:.2f} latency_bound_s={bound:.2f} cpu_s={cpu:.2f}")
    print(f"loadavg_1min_before={load0:.2f} after={os.getloadavg()[0]:.2f} nproc={os.cpu_count()}")
    print(f"server (serve-sim, another process) cpu_s={server_cpu - server_cpu0:.2f} "
          f"= {1000 * (server_cpu - server_cpu0) / max(calls, 1):.3f} ms/call")
    print(f"sandbox (fork server + workers, including setup's validation) cpu_s={sandbox_cpu:.2f} "
          f"= {1000 * sandbox_cpu / max(calls, 1):.3f} ms/call")
    if args.litellm_processes:
        print(f"litellm worker processes: {args.litellm_processes}, their cpu_s={timing['workers_cpu']:.2f} "
              f"= {1000 * timing['workers_cpu'] / max(calls, 1):.3f} ms/call (including their start)")
    print(f"cpu_ms_per_call={1000 * cpu / max(calls, 1):.3f}")
    print(f"ratio={wall / bound:.3f}" if bound else "ratio=nan")
    return 0


if __name__ == "__main__":
    sys.exit(main())
