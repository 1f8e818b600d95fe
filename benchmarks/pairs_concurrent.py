"""Benchmark (issue 35): a pair stage's wall time against the bound a provider's in-flight limit sets.

    .venv/bin/python benchmarks/pairs_concurrent.py --models 9 --latency-ms 2000 --max-in-flight 64 \
        --source before=/tmp/base-checkout:1 --source after=.:9

Each ``--source label=checkout:rows`` runs this benchmark in a child process with that checkout first on
PYTHONPATH (two versions side by side in one run, one environment), playing ``rows`` author rows of the
pair matrix (rows x M pairs) in one ranged run. Without ``--source``, this checkout, every row. Each child starts ``envduels serve-sim --latency-ms L`` (one provider), registers M simulated models, has each
write its environments in-process (setup, not timed), then plays the pair stage through Dagster the
way the request sensor does: the ``duel_episodes`` asset (with its checks) in a ranged run, every
solver served over HTTP by the one serve-sim (pool ``serve-sim``, ``max_in_flight: F`` on every solver;
code before issue 35 ignores it: its pool holds ``max_concurrency`` = 8 calls and it plays one pair at
a time). For each: model calls, wall time of the run, the play's own time (``batch_seconds``) and the bound
the limit sets, calls x L / F (the provider's allowance, F calls in flight), and wall / bound.
Each child has its own call cache, so none replays another's calls.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from servers import sim_server

if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROFILES = ["oracle", "expert", "journeyman", "novice", "oracle", "expert", "journeyman", "novice", "oracle"]


def registry_text(names: list[str], base: str | None, max_in_flight: int | None) -> str:
    lines = ["models:"]
    for i, name in enumerate(names):
        profile = PROFILES[i % len(PROFILES)]
        lines += [f"  - name: {name}", "    version: '1'"]
        if base is None:  # authoring: in-process
            lines += [f"    model: envduels-sim/{profile}"]
        else:
            lines += [f"    model: openai/{profile}", f"    api_base: {base}", "    client: fast",
                      "    request_contract: true", "    pool: serve-sim"]
            if max_in_flight:
                lines += [f"    max_in_flight: {max_in_flight}"]
    return "\n".join(lines) + "\n"


def install_trace() -> dict[str, list]:
    """Wrap the gateway's ``chat`` and ``play_episode`` (this process plays in-process) to record when each
    model call and each episode started and ended, and how many calls each episode made."""
    from envduels_dagster.core.models.gateway import Gateway
    from envduels_dagster.core.play import episode

    trace: dict[str, list] = {"calls": [], "episodes": []}
    chat, play = Gateway.chat, episode.play_episode

    async def traced_chat(self, *a, **k):
        t = time.perf_counter()
        reply = await chat(self, *a, **k)
        if not reply.cached:  # a call cache hit never reaches the provider
            trace["calls"].append((t, time.perf_counter()))
        return reply

    async def traced_play(gateway, solver, env, *a, **k):
        t = time.perf_counter()
        rec = await play(gateway, solver, env, *a, **k)
        trace["episodes"].append((t, time.perf_counter(), rec.model_calls - rec.cached_calls,
                                  f"{env.author}|{solver}"))
        return rec

    Gateway.chat, episode.play_episode = traced_chat, traced_play
    import duckdb

    from envduels_dagster.core.storage import warehouse

    trace["warehouse"] = []  # (what, seconds): every duckdb.connect and every full schema check
    connect, check = duckdb.connect, warehouse._ensure_schema

    def timed(what, fn):
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                trace["warehouse"].append((what, time.perf_counter() - t))
        return wrapper

    duckdb.connect, warehouse._ensure_schema = timed("connect", connect), timed("schema", check)
    return trace


def occupancy(trace: dict[str, list], latency_s: float, limit: int, run_start: float, run_end: float) -> str:
    """Calls and episodes in flight over the play, in 10 windows, and the bounds: the provider's (calls x L / F)
    and the critical path (the longest episode's calls x L, its turns being sequential). Calls and episode
    lengths count only calls that reached the provider (not the call cache's hits)."""
    calls, episodes = trace["calls"], trace["episodes"]
    if not calls:
        return "trace: no calls"
    t0 = min(t for t, *_ in episodes)
    t1 = max(e for _, e, *_ in episodes)
    span = t1 - t0
    windows = 10

    def mean_in_flight(spans, a, b):
        return sum(max(0.0, min(e, b) - max(s, a)) for s, e, *_ in spans) / max(1e-9, b - a)

    edges = [t0 + span * i / windows for i in range(windows + 1)]
    calls_w = [mean_in_flight(calls, edges[i], edges[i + 1]) for i in range(windows)]
    eps_w = [mean_in_flight(episodes, edges[i], edges[i + 1]) for i in range(windows)]
    longest = max(n for *_, n, _ in episodes)
    provider = len(calls) * latency_s / limit
    critical = longest * latency_s
    pair_spans: dict[str, list[float]] = {}
    for s, e, _, pair in episodes:
        pair_spans.setdefault(pair, [s, e])
        pair_spans[pair][0], pair_spans[pair][1] = min(pair_spans[pair][0], s), max(pair_spans[pair][1], e)
    starts = sorted(s - t0 for s, *_ in episodes)
    ops = trace.get("warehouse", [])
    conns = [d for w, d in ops if w == "connect"]
    checks = [d for w, d in ops if w == "schema"]
    warehouse_line = (f"  warehouse: {len(conns)} duckdb.connect ({sum(conns):.1f}s), {len(checks)} full schema "
                      f"checks ({sum(checks):.1f}s)\n")
    return (f"trace: episodes={len(episodes)} calls={len(calls)} play_span_s={span:.1f} "
            f"mean_calls_in_flight={mean_in_flight(calls, t0, t1):.1f}/{limit} "
            f"mean_episodes_in_flight={mean_in_flight(episodes, t0, t1):.1f} "
            f"mean_call_s={sum(e - s for s, e in calls) / len(calls):.2f}\n"
            f"  calls in flight per tenth of the play: {' '.join(f'{x:.0f}' for x in calls_w)}\n"
            f"  episodes in flight per tenth:          {' '.join(f'{x:.0f}' for x in eps_w)}\n"
            f"  episode starts: first {starts[0]:.1f}s, median {starts[len(starts) // 2]:.1f}s, last {starts[-1]:.1f}s;"
            f" longest episode {longest} calls\n"
            f"{warehouse_line}"
            f"  run: {t0 - run_start:.1f}s before the first episode, {run_end - t1:.1f}s after the last\n"
            f"  bounds: provider (calls x {latency_s:g} s / {limit}) {provider:.1f}s, critical path (longest episode "
            f"{longest} calls x {latency_s:g} s) {critical:.1f}s, max of both {max(provider, critical):.1f}s; "
            f"play span / max = {span / max(provider, critical):.2f}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=9)
    parser.add_argument("--latency-ms", type=float, default=2000.0)
    parser.add_argument("--max-in-flight", type=int, default=64)
    parser.add_argument("--envs-per-author", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--rows", type=int, default=0, help="author rows to play (0: all)")
    parser.add_argument("--source", action="append", default=[], help="label=checkout:rows, run in a child")
    parser.add_argument("--trace", action="store_true",
                        help="record every model call and episode (start, end) and print slot occupancy")
    args = parser.parse_args()
    if args.source:
        for spec in args.source:
            label, _, rest = spec.partition("=")
            path, _, rows = rest.rpartition(":")
            cmd = [sys.executable, __file__, "--models", str(args.models), "--latency-ms", str(args.latency_ms),
                   "--max-in-flight", str(args.max_in_flight), "--envs-per-author", str(args.envs_per_author),
                   "--seeds", str(args.seeds), "--rows", rows or "0", *(["--trace"] if args.trace else [])]
            env = {**os.environ, "PYTHONPATH": str(Path(path).resolve())}
            print(f"== {label}: {path} ({rows or 'all'} rows)", flush=True)
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            print("\n".join(line for line in proc.stdout.splitlines()), flush=True)
            if proc.returncode != 0:
                print(proc.stderr[-3000:], flush=True)
        return 0
    import envduels_dagster

    print(f"code: {Path(envduels_dagster.__file__).parent.parent}", flush=True)

    import dagster as dg
    from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

    from envduels_dagster.assets.authoring.assets import authored_environments
    from envduels_dagster.assets.duels.assets import duel_episodes
    from envduels_dagster.assets.registry.partitions import register_models
    from envduels_dagster.definitions import build_definitions, build_resources
    from envduels_dagster.resources import DuelSettings, GatewayResource, WarehouseResource

    trace = install_trace() if args.trace else None
    work = Path(tempfile.mkdtemp(prefix="envduels-pairs-concurrent-"))
    names = [f"m{i + 1}" for i in range(args.models)]
    settings = DuelSettings(envs_per_author=args.envs_per_author, benchmark_seeds=list(range(args.seeds)))
    warehouse = WarehouseResource(database=str(work / "warehouse.duckdb"))  # as the definitions have it

    def resources(registry: Path, cache: str):
        return build_resources(gateway=GatewayResource(registry_path=str(registry), cache_path=str(work / cache)),
                               settings=settings, warehouse=warehouse)

    checks = [c for c in build_definitions().asset_checks
              if any(k.asset_key.to_user_string() == "duel_episodes" for k in c.check_keys)]
    quiet = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
    server = sim_server("--host", "127.0.0.1", "--latency-ms", str(args.latency_ms))
    base = server.base
    try:
        authoring = work / "authoring.yaml"
        authoring.write_text(registry_text(names, None, None))
        instance = dg.DagsterInstance.ephemeral()
        register_models(instance, names)
        t0 = time.perf_counter()
        for name in names:
            assert dg.materialize([authored_environments], instance=instance, resources=resources(authoring, "a.sqlite"),
                                  partition_key=name, run_config=quiet).success
        print(f"setup: {len(names)} authors wrote their environments in {time.perf_counter() - t0:.1f}s")

        def stage(label: str, registry: Path, cache: str, authors: list[str], limit: int) -> None:  # noqa: ARG001
            tags = {ASSET_PARTITION_RANGE_START_TAG: f"{authors[0]}|{names[0]}",
                    ASSET_PARTITION_RANGE_END_TAG: f"{authors[-1]}|{names[-1]}"}
            load = os.getloadavg()[0]
            t, cpu = time.perf_counter(), time.process_time()
            result = dg.materialize([duel_episodes, *checks], instance=instance, resources=resources(registry, cache),
                                    tags=tags, run_config=quiet, raise_on_error=False)
            wall, cpu = time.perf_counter() - t, time.process_time() - cpu
            mats = result.asset_materializations_for_node("duel_episodes")
            calls = sum(m.metadata["model_calls"].value for m in mats)
            episodes = sum(m.metadata["num_rows"].value for m in mats)
            incomplete = sum(m.metadata["incomplete"].value for m in mats)
            play = next((m.metadata["batch_seconds"].value for m in mats if "batch_seconds" in m.metadata), float("nan"))
            width = next((m.metadata["episode_slots"].value for m in mats if "episode_slots" in m.metadata), "none")
            bound = max(1e-9, calls * args.latency_ms / 1000 / args.max_in_flight)
            if not result.success:
                print("run failed: " + "; ".join(str(e.message)[:500] for e in result.all_events if e.is_failure),
                      flush=True)
            print(f"{label}: success={result.success} pairs={len(mats)} episode_slots={width} "
                  f"episodes={episodes} incomplete={incomplete} model_calls={calls} run_wall_s={wall:.1f} "
                  f"play_s={play:.1f} bound_s(calls x {args.latency_ms / 1000:g} s / {args.max_in_flight})={bound:.1f} "
                  f"ratio_run={wall / bound:.2f} ratio_play={play / bound:.2f} process_cpu_s={cpu:.1f} "
                  f"load1_at_start={load:.1f} load1_at_end={os.getloadavg()[0]:.1f}", flush=True)
            if trace is not None:
                print(occupancy(trace, args.latency_ms / 1000, args.max_in_flight, t, t + wall), flush=True)

        registry = work / "play.yaml"
        registry.write_text(registry_text(names, base, args.max_in_flight))
        with warehouse.get_connection() as conn:
            valid = {a for (a,) in conn.execute("SELECT DISTINCT author FROM environments WHERE valid").fetchall()}
        first = next((i for i, n in enumerate(names) if n in valid), 0)  # a row with something to play
        rows = names[first:first + args.rows] if args.rows else names
        stage(f"{len(rows)} author row(s), max_in_flight {args.max_in_flight}", registry, "c.sqlite", rows,
              args.max_in_flight)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
