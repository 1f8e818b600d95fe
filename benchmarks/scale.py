"""Benchmark: a registry of 30 simulated models (900 pairs) in Dagster.

    .venv/bin/python benchmarks/scale.py [--models 30] [--skip-browser] [--skip-marts]

Measures, on a temporary persistent instance (DAGSTER_HOME) holding the 30 models as
partitions and one materialization per partition (30 authors, 900 pairs), as a finished
run would leave it:

1. the ``new_models_sensor`` tick: the first tick with all 30 models new (registers them,
   requests 30 author runs and 900 pair runs), a repeat tick (nothing new), and the tick
   after a 31st model is added (61 new pairs). Invoked as the daemon does, directly,
   inside ``partition_loading_context`` (see tests/assets/registry/test_incremental.py);
2. loading the asset graph: importing ``envduels_dagster.definitions`` and resolving the
   asset graph in a fresh interpreter, ``dagster definitions validate -w workspace.yaml``,
   and the webserver (``dagster-webserver -w workspace.yaml`` on 127.0.0.1): start until it
   answers, then a GraphQL query for every asset node with its partition definition, the
   900-pair partition key list and the materialization status of duel_episodes'
   partitions (what the asset pages fetch);
3. with Chromium and selenium available: time until the global lineage page and the
   partitions page of duel_episodes ("Materialized (900)") render in headless Chromium;
4. the dbt marts (``dbt build`` through Dagster, with their tests) plus rankings on a
   synthetic warehouse of 30 models x 3 environments per author x 4 seeds x 2 conditions
   (benchmarks/marts.py --models 30 --envs-per-author 3).

With ``--daemon``: instead, the registry end to end through ``dagster dev`` (webserver + daemon),
once per ``--pairs-per-run`` value (1 = one run per pair, as before batching), and the pair stage's
wall time against its compute (benchmarks/scale_daemon.py says what is measured).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PROFILES = ["oracle", "expert", "journeyman", "apprentice", "novice"]


def names(n: int) -> list[str]:
    return [f"{PROFILES[i % len(PROFILES)]}-{i + 1:02d}" for i in range(n)]


def write_registry(path: Path, models: list[str]) -> None:
    lines = ["models:"]
    for name in models:
        lines += [f"  - name: {name}", f"    model: envduels-sim/{name.rsplit('-', 1)[0]}"]
    path.write_text("\n".join(lines) + "\n")


def timed(label: str, fn, figures: dict):
    t0 = time.perf_counter()
    out = fn()
    figures[label] = time.perf_counter() - t0
    print(f"{label}: {figures[label]:.3f}s", flush=True)
    return out


def sensor_ticks(registry: Path, home: Path, n: int, figures: dict) -> None:
    import dagster as dg

    from envduels_dagster.assets.registry.sensors import new_models_sensor

    os.environ["ENVDUELS_REGISTRY"] = str(registry)
    home.mkdir(parents=True, exist_ok=True)
    instance = dg.DagsterInstance.local_temp(str(home))

    def tick(cursor=None):
        ctx = dg.build_sensor_context(instance=instance, cursor=cursor)
        with dg.partition_loading_context(dynamic_partitions_store=instance):
            result = new_models_sensor(ctx)
        return result

    result = timed(f"sensor tick, {n} new models", tick, figures)
    runs = result.run_requests
    print(f"  -> {len(runs)} run requests ({sum(r.job_name == 'pair_job' for r in runs)} pairs)")
    t0 = time.perf_counter()
    for req in result.dynamic_partitions_requests:
        instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
    figures["registering partitions (as the daemon does after the tick)"] = time.perf_counter() - t0
    cursor = result.cursor
    skip = timed("sensor tick, nothing new", lambda: tick(cursor), figures)
    print(f"  -> {getattr(skip, 'skip_message', skip)}")
    write_registry(registry, names(n + 1))
    more = timed(f"sensor tick, model {n + 1} added", lambda: tick(cursor), figures)
    print(f"  -> {len(more.run_requests)} run requests")
    write_registry(registry, names(n))
    instance.dispose()


def seed_materializations(home: Path, n: int, figures: dict) -> None:
    """One materialization per author and pair partition, as a finished demo would leave."""
    import dagster as dg

    from envduels_dagster.assets.registry.partitions import pair_key, register_models

    def go():
        instance = dg.DagsterInstance.local_temp(str(home))
        models = names(n)
        register_models(instance, models)
        for a in models:
            instance.report_runless_asset_event(dg.AssetMaterialization(
                "authored_environments", partition=a, metadata={"num_rows": 3, "valid": 3}))
            for s in models:
                instance.report_runless_asset_event(dg.AssetMaterialization(
                    "duel_episodes", partition=pair_key(a, s),
                    metadata={"num_rows": 24, "pass_rate_cold": 0.5, "pass_rate_hinted": 0.75, "lift": 0.25}))
        instance.dispose()

    timed(f"recording {n} author + {n * n} pair materializations (setup)", go, figures)


def child_env(home: Path, registry: Path) -> dict:
    env = {k: v for k, v in os.environ.items()}
    env.update(DAGSTER_HOME=str(home), ENVDUELS_HOME=str(home / "envduels"), ENVDUELS_REGISTRY=str(registry),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    return env


def load_graph(home: Path, registry: Path, figures: dict) -> None:
    env = child_env(home, registry)
    code = ("import time; t=time.perf_counter(); import envduels_dagster.definitions as d; t1=time.perf_counter(); "
            "g=d.defs().resolve_asset_graph(); n=len(list(g.get_all_asset_keys())); t2=time.perf_counter(); "
            "print(f'{t1-t:.3f} {t2-t1:.3f} {n}')")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    imp, resolve, count = out.stdout.split()[-3:]
    figures["import envduels_dagster.definitions"] = float(imp)
    figures["resolve the asset graph"] = float(resolve)
    print(f"import envduels_dagster.definitions: {float(imp):.3f}s; resolve the asset graph ({count} assets): "
          f"{float(resolve):.3f}s")
    t0 = time.perf_counter()
    out = subprocess.run([str(Path(sys.executable).with_name("dagster")), "definitions", "validate", "-w",
                          str(REPO / "workspace.yaml")], cwd=REPO, env=env, capture_output=True, text=True)
    figures["dagster definitions validate"] = time.perf_counter() - t0
    print(f"dagster definitions validate: {figures['dagster definitions validate']:.3f}s (exit {out.returncode})")


GRAPHQL_ASSETS = """{ assetNodes { assetKey { path } isPartitioned partitionDefinition { description } } }"""
GRAPHQL_PARTITIONS = """{ assetNodeOrError(assetKey: {path: ["duel_episodes"]}) { ... on AssetNode {
  partitionKeysByDimension { name partitionKeys }
  assetPartitionStatuses { __typename ... on MultiPartitionStatuses { primaryDimensionName
    ranges { primaryDimStartKey primaryDimEndKey secondaryDim { ... on DefaultPartitionStatuses {
      materializedPartitions } } } } } } } }"""


def graphql(base: str, query: str) -> dict:
    req = urllib.request.Request(f"{base}/graphql", data=json.dumps({"query": query}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as resp:
        return json.loads(resp.read())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def webserver(home: Path, registry: Path, n: int, figures: dict, browser: bool) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(home / "webserver.log", "w")
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(Path(sys.executable).with_name("dagster-webserver")), "-w",
                             str(REPO / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(port)],
                            cwd=REPO, env=child_env(home, registry), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"dagster-webserver exited; see {home / 'webserver.log'}")
            try:
                with urllib.request.urlopen(f"{base}/server_info", timeout=2):
                    break
            except OSError:
                time.sleep(0.2)
        figures["webserver: start until it answers"] = time.perf_counter() - t0
        print(f"webserver: start until it answers: {figures['webserver: start until it answers']:.3f}s")
        t1 = time.perf_counter()
        while True:  # the code location loads in a subprocess; assetNodes is empty until it has
            data = graphql(base, GRAPHQL_ASSETS)
            nodes = (data.get("data") or {}).get("assetNodes") or []
            if nodes:
                break
            time.sleep(0.2)
        figures["webserver: code location loaded, asset graph query"] = time.perf_counter() - t1
        print(f"webserver: code location loaded and all {len(nodes)} asset nodes returned: "
              f"{figures['webserver: code location loaded, asset graph query']:.3f}s")
        for i in range(2):
            t2 = time.perf_counter()
            graphql(base, GRAPHQL_ASSETS)
            figures[f"webserver: asset graph query (warm #{i + 1})"] = time.perf_counter() - t2
        print(f"webserver: asset graph query, warm: {figures['webserver: asset graph query (warm #2)']:.3f}s")
        t3 = time.perf_counter()
        data = graphql(base, GRAPHQL_PARTITIONS)
        figures["webserver: duel_episodes partition keys + statuses query"] = time.perf_counter() - t3
        node = (data.get("data") or {}).get("assetNodeOrError") or {}
        dims = {d["name"]: len(d["partitionKeys"]) for d in node.get("partitionKeysByDimension") or []}
        ranges = ((node.get("assetPartitionStatuses") or {}).get("ranges")) or []
        materialized = sum(len((r.get("secondaryDim") or {}).get("materializedPartitions") or [])
                           * 1 for r in ranges)
        print(f"webserver: duel_episodes partition keys {dims} + statuses ({len(ranges)} ranges, "
              f"{materialized} materialized solver keys listed): "
              f"{figures['webserver: duel_episodes partition keys + statuses query']:.3f}s"
              + (f"  errors: {data['errors'][0]['message'][:200]}" if data.get("errors") else ""))
        if browser:
            render(base, n, figures)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def render(base: str, n: int, figures: dict) -> None:
    chromium, driver_path = shutil.which("chromium") or "/usr/bin/chromium", shutil.which("chromedriver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.common.by import By
    except ImportError:
        print("browser: selenium not installed, skipped")
        return
    if not (os.path.exists(chromium) and driver_path):
        print("browser: chromium/chromedriver not found, skipped")
        return
    profile = tempfile.mkdtemp(prefix="envduels-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1600,1000", f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    try:
        for label, path, texts in [
            ("lineage page", "/asset-groups", ["Global asset lineage", "duel"]),
            ("duel group graph", "/locations/envduels/asset-groups/duel", ["duel_episodes", f"{n * n} partitions"]),
            ("duel_episodes partitions page", "/assets/duel_episodes?view=partitions",
             [f"Materialized ({n * n})", f"{n * n} Partitions Selected"]),
        ]:
            t0 = time.perf_counter()
            driver.get(base + path)
            body = ""
            while time.perf_counter() - t0 < 180:
                for button in driver.find_elements(By.XPATH, "//button[normalize-space()='Skip']"):
                    button.click()
                body = driver.find_element(By.TAG_NAME, "body").text
                if all(t in body for t in texts):
                    break
                time.sleep(0.1)
            ok = all(t in body for t in texts)
            figures[f"browser: {label} rendered"] = time.perf_counter() - t0
            print(f"browser: {label} rendered{'' if ok else ' (NOT all expected text)'}: "
                  f"{figures[f'browser: {label} rendered']:.2f}s")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def marts(n: int, figures: dict) -> None:
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "marts.py"), "--models", str(n),
                          "--envs-per-author", "3", "--seeds", "4"], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"})
    for line in out.stdout.splitlines():
        if re.match(r"(generated|dbt build|rankings|rows|top solvers|TOTAL)", line):
            print(f"marts: {line}")
        if m := re.search(r"dbt build .*?: ([\d.]+)s", line):
            figures["marts: dbt build"] = float(m.group(1))
        if m := re.search(r"rankings .*?: ([\d.]+)s", line):
            figures["marts: rankings"] = float(m.group(1))
    if out.returncode:
        print(out.stderr[-2000:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=30)
    parser.add_argument("--skip-browser", action="store_true")
    parser.add_argument("--skip-marts", action="store_true")
    parser.add_argument("--keep", help="use this directory as DAGSTER_HOME and keep it")
    parser.add_argument("--daemon", action="store_true", help="end to end through the daemon (scale_daemon.py)")
    parser.add_argument("--pairs-per-run", default="1,0",
                        help="with --daemon: batch sizes to compare (0: the sensor's own choice)")
    parser.add_argument("--seeds", type=int, default=4, help="with --daemon")
    parser.add_argument("--dagster-yaml", action="append", type=Path,
                        help="with --daemon: instance configurations to compare (each batch size runs on each)")
    parser.add_argument("--parallel-runs", type=int, help="with --daemon: ENVDUELS_PARALLEL_RUNS (default 2)")
    parser.add_argument("--work-per-pair", type=float,
                        help="with --daemon: the work per pair (s) the ratio is taken against; by default the "
                             "play + validation per pair of a one-pair-per-run row, once one has run")
    parser.add_argument("--rounds", type=int, default=0, help="with --daemon: co-evolution rounds (ENVDUELS_ROUNDS)")
    parser.add_argument("--envs-per-author", type=int, default=3, help="with --daemon")
    parser.add_argument("--pairs-only", action="store_true", help="with --daemon: stop after the pair stage")
    parser.add_argument("--sensor-interval", default="5",
                        help="with --daemon: ENVDUELS_SENSOR_INTERVAL_S values to compare (each on each configuration)")
    parser.add_argument("--stage-launch", default="on-end",
                        help="with --daemon: ENVDUELS_STAGE_LAUNCH values to compare (on-end: the run that ends a "
                             "stage submits the next; sensor: only the request sensor's tick), each on each")
    parser.add_argument("--repeat", type=int, default=1,
                        help="with --daemon: run the whole comparison this many times, interleaved")
    args = parser.parse_args()
    print(f"machine: nproc={os.cpu_count()} loadavg={os.getloadavg()[0]:.2f}; {args.models} models -> "
          f"{args.models ** 2} pairs")
    if args.daemon:
        from benchmarks.scale_daemon import daemon_flow

        work = args.work_per_pair
        combos = [(k, yaml, int(interval), launch) for k in [int(v) for v in args.pairs_per_run.split(",")]
                  for yaml in args.dagster_yaml or [None] for interval in args.sensor_interval.split(",")
                  for launch in args.stage_launch.split(",")]
        for _ in range(args.repeat):
            for k, yaml, interval, launch in combos:
                extra = {"ENVDUELS_STAGE_LAUNCH": launch}
                if args.parallel_runs:
                    extra["ENVDUELS_PARALLEL_RUNS"] = str(args.parallel_runs)
                out = daemon_flow(names(args.models), k, args.rounds, args.envs_per_author, pairs_only=args.pairs_only,
                                  seeds=args.seeds, work_per_pair=work, dagster_yaml=yaml, sensor_interval=interval,
                                  extra_env=extra)
                if work is None and k == 1 and "play_per_pair_s" in out:  # pairs alone in their runs: no overlap
                    work = out["play_per_pair_s"] + out["checks_per_pair_s"]
        return 0
    home = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="envduels-scale-"))
    home.mkdir(parents=True, exist_ok=True)
    registry = home / "models.yaml"
    write_registry(registry, names(args.models))
    figures: dict[str, float] = {}
    sensor_ticks(registry, home / "sensor-instance", args.models, figures)
    seed_materializations(home, args.models, figures)
    load_graph(home, registry, figures)
    webserver(home, registry, args.models, figures, browser=not args.skip_browser)
    if not args.skip_marts:
        marts(args.models, figures)
    print(f"loadavg after: {os.getloadavg()[0]:.2f}")
    if not args.keep:
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
