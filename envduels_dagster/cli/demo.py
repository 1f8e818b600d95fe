"""``envduels demo``: the whole pipeline on the simulated models, through Dagster.

Runs land in the persistent instance under ENVDUELS_HOME so that `envduels ui`
(``dagster dev``) shows them afterwards.
"""

from __future__ import annotations

import contextlib
import io
import sys
import time
from typing import Any

# How long the demo's summary waits for a warehouse another process is writing (a second demo's pair runs or
# its dbt build, which holds the file for the whole build: 83 s measured at load 15 on 2 cores).
SUMMARY_WAIT_S = 600.0
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def _partitions_kind(asset) -> str:
    from envduels_dagster.assets.registry.partitions import models_partitions, pair_partitions, solver_partitions

    pd = asset.partitions_def
    if pd is None:
        return "none"
    return "pair" if pd == pair_partitions else "model" if pd in (models_partitions, solver_partitions) else "?"


def _round_of(asset) -> int | None:
    """0 for the first authoring/pair assets, r for ``*_r{r}`` round assets, None for everything else."""
    name = asset.key.to_user_string() if len(asset.keys) == 1 else ""
    if name in ("authored_environments", "duel_episodes"):
        return 0
    if name.startswith(("hardened_environments_r", "duel_episodes_r")):
        return int(name.rsplit("_r", 1)[1])
    return None


def materialize_all(instance, resources: dict | None = None, log=print, names: list[str] | None = None,
                    learners: bool = True, on_run=None) -> dict:
    """Materialize every partition of every asset in dependency order; return counts.

    Order: registry -> for each round: authors, then pairs -> every unpartitioned
    downstream asset in one run (marts, rankings; Dagster orders them) -> per-learner
    assets. New assets join automatically through the areas' definitions. Each step runs the project's job
    that ``envduels_requests`` launches for that stage (``author_job``, ``pair_job``, ``downstream_job``,
    ``learner_job``, ``studies_job``; rounds' ``hardened_r<r>_job``/``pairs_r<r>_job``), with the sensor's
    ``envduels/request`` (``demo-<time>``), ``envduels/stage`` and ``envduels/provider`` tags: a new asset must
    be in its stage's job.
    ``learners=False`` stops before the per-learner assets and the studies that read them
    (a test that reads only rankings and authoring_progress saves ~15% of the run).

    Roles (``core/requests/roster.py``): only models with the author role author, only author x solver-role pairs
    are played, only solver-role models get training sets; a registry with no author or no solver is
    refused before anything is written. Every model has both roles by default: the full tournament.
    ``on_run(label, seconds)`` is called after each run succeeded (``envduels run`` prints what was spent so far).
    """
    import dagster as dg
    from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

    from envduels_dagster.assets.marts.project import prepare_manifest
    from envduels_dagster.assets.registry.assets import model_registry
    from envduels_dagster.assets.registry.partitions import pair_key, register_roster
    from envduels_dagster.assets.registry.requests import REQUEST_TAG, STAGE_TAG, dimension_orders, stage_job_name
    from envduels_dagster.cli.demo_prefetch import prefetch_authoring
    from envduels_dagster.core.models.registry import load_registry
    from envduels_dagster.core.requests.batching import pair_batches
    from envduels_dagster.core.requests.roster import Roster
    from envduels_dagster.core.requests.stages import Stage
    from envduels_dagster.definitions import build_definitions, build_resources
    from envduels_dagster.instance.run_coordinator import PROVIDER_TAG
    from envduels_dagster.instance.run_launcher import (
        worker_tags,  # a killed demo's run is then failed by run monitoring
    )
    from envduels_dagster.settings.locations import registry_file

    resources = resources or build_resources()
    gateway: Any = resources["gateway"]
    path = gateway.registry_path
    registry = load_registry(registry_file((path.get_value() if isinstance(path, dg.EnvVar) else path) or None))  # fails before any run
    roster = Roster.from_registry(registry, names=names or None)  # no author or no solver: refused here
    prepare_manifest()  # the dbt marts need a current manifest; loading the definitions never parses
    defs = build_definitions()
    ALL_ASSETS, ALL_CHECKS = list(defs.assets), list(defs.asset_checks)
    full = Roster.from_registry(registry, check=False)
    new = register_roster(instance, full)
    log(f"registry {registry.path}: {len(registry.names)} models ({len(new)} newly registered as partitions)"
        + ("" if full.authors == full.solvers else
           f"; authors {', '.join(full.authors)}; solvers {', '.join(full.solvers)}"))
    by_kind: dict[str, list] = {"none": [], "model": [], "pair": []}
    for asset in ALL_ASSETS:
        by_kind[_partitions_kind(asset)].append(asset)
    # Round r's authoring and pair assets (round 0: authored_environments, duel_episodes).
    round_of = {a: _round_of(a) for a in ALL_ASSETS}
    rounds = sorted({r for a, r in round_of.items() if r is not None})
    authors = {r: [a for a in by_kind["model"] if round_of[a] == r] for r in rounds}
    pair_assets = {r: [a for a in by_kind["pair"] if round_of[a] == r] for r in rounds}
    learner_assets = [a for a in by_kind["model"] if round_of[a] is None]
    learner_keys = {k for a in learner_assets for k in a.keys}
    after_learners = [a for a in by_kind["none"] if any(d.asset_key in learner_keys for s in a.specs for d in s.deps)]
    downstream = [a for a in by_kind["none"] if a is not model_registry and a not in after_learners]

    # The project's jobs (the ones envduels_requests launches), bound to the demo's resources, so the demo's
    # runs are named and tagged like the sensor's: envduels/request, envduels/stage, envduels/provider.
    jobs = dg.Definitions(assets=ALL_ASSETS, asset_checks=ALL_CHECKS, jobs=list(defs.jobs or []), resources=resources)
    providers = {m.name: m.provider for m in registry.models}
    request = f"demo-{int(time.time())}"
    stages: dict[str, int] = {}

    def run(assets, partition_key=None, label="", job="", stage="", provider_of=None, extra_tags=None):
        t0 = time.perf_counter()
        tags = {REQUEST_TAG: request, STAGE_TAG: str(stages.setdefault(stage, len(stages))), "envduels/demo": stage}
        provider = providers.get(provider_of or "")
        if provider:
            tags[PROVIDER_TAG] = provider
        chatter = io.StringIO()  # dbt echoes its whole log to stdout; keep it for failures only
        with contextlib.redirect_stdout(chatter):
            result = jobs.get_job_def(job).execute_in_process(
                instance=instance, partition_key=partition_key, run_config=QUIET, raise_on_error=False,
                tags={**tags, **(extra_tags or {}), **worker_tags()}, asset_selection=[k for a in assets for k in a.keys])
        if not result.success:
            print(chatter.getvalue()[-5000:], file=sys.stderr)
            if _interrupted(result):  # Ctrl-C or SIGTERM inside a step: exit 130, not "demo failed" (issue 33)
                raise KeyboardInterrupt
            raise RuntimeError(f"run for {label} failed{_budget_stop(result)}; see run {result.run_id} (job {job}, tag "
                               f"{REQUEST_TAG}={request}) in the Dagster UI")
        if on_run is not None:
            on_run(label, time.perf_counter() - t0)
        return result, time.perf_counter() - t0

    def meta(result, assets):
        name = assets[0].key.to_user_string()
        return result.asset_materializations_for_node(name)[0].metadata

    def stage_job(kind, round_):
        return stage_job_name(Stage(kind, round_))

    run([model_registry], label="model_registry", job="downstream_job", stage="registry")
    budget_stops: list[str] = []  # pairs a spending cap cut short: said again in the last lines (issue 44)
    pairs = roster.pairs(0)  # only registry models here: imports are played by the request sensor
    writers = list(roster.authors)
    for r in rounds:
        # every remote author's calls of the round at once, then its run reads them from the call cache
        # (demo_prefetch.py: Dagster's in-process runs cannot run on threads)
        prefetch_authoring(resources, registry, writers, r, log)
        for i, author in enumerate(writers, 1):
            result, secs = run(authors[r], author, f"round {r} authoring [{author}]", stage_job("authors", r),
                               f"authors round {r}", author)
            md = meta(result, authors[r])
            log(f"[round {r} author {i}/{len(writers)}] {author}: {md['valid'].value}/{md['num_rows'].value} valid "
                f"({secs:.1f}s)")
        # The round's pairs in ranged runs (issue 35): a rectangle of the pair matrix per run, its pairs
        # played at once as the solvers' providers allow (assets/duels/assets.py); one run when the
        # demo plays every registered model, instead of one run per pair.
        orders = dimension_orders(instance)
        done = 0
        for batch in pair_batches([pair_key(a, s) for a, s in pairs], *orders, max_per_run=len(pairs), parallel=1):
            tags = ({} if len(batch) == 1 else {ASSET_PARTITION_RANGE_START_TAG: batch.start,
                                                ASSET_PARTITION_RANGE_END_TAG: batch.end})
            key = batch.start if len(batch) == 1 else None
            result, secs = run(pair_assets[r], key, f"round {r} pairs {batch.start}..{batch.end}",
                               stage_job("pairs", r), f"pairs round {r}", extra_tags=tags,
                               provider_of=batch.solvers[0] if len({providers.get(x) for x in batch.solvers}) == 1
                               else None)  # one solver provider: tagged like the sensor's runs
            for mat in result.asset_materializations_for_node(pair_assets[r][0].key.to_user_string()):
                done += 1
                md = mat.metadata
                author, solver = str(mat.partition).split("|", 1)
                stopped = md["stopped_at_budget"].value if "stopped_at_budget" in md else 0
                if stopped:
                    budget_stops.append(f"{author} -> {solver}: {md['budget_note'].value}")
                log(f"[round {r} pair {done}/{len(pairs)}] {author} -> {solver}: {md['num_rows'].value} episodes, "
                    f"cold {md['pass_rate_cold'].value:.2f} hinted {md['pass_rate_hinted'].value:.2f}"
                    + (f"; {stopped} stopped at budget" if stopped else ""))
            log(f"[round {r} pairs] {len(batch)} in one run ({secs:.1f}s)")
    result, secs = run(downstream, label="marts and rankings", job="downstream_job", stage="downstream")
    log(f"[marts] {', '.join(k.to_user_string() for a in downstream for k in a.keys)} ({secs:.1f}s)")
    counts = {"models": len(roster.models), "pairs": len(pairs), "authors": len(roster.authors),
              "solvers": len(roster.solvers), "budget_stops": budget_stops}
    if not learners:
        return {**counts, "request": request}
    for learner in roster.solvers:
        result, _ = run(learner_assets, learner, f"learner {learner}", "learner_job", "learners")
        log(f"[training] {learner}: {meta(result, learner_assets)['num_rows'].value} environments")
    if after_learners:
        result, secs = run(after_learners, label="studies", job="studies_job", stage="studies")
        log(f"[studies] {', '.join(a.key.to_user_string() for a in after_learners)} ({secs:.1f}s)")
    return {**counts, "request": request}


def _budget_stop(result) -> str:
    """': <the step's message>' when a spending cap failed the run (it says what is left and what to raise)."""
    for event in result.all_events:
        error = getattr(event.event_specific_data, "error", None)
        if error is not None and ("stopped at budget" in error.message or "stopped_at_budget" in error.message):
            return ": " + " ".join(error.message.split())[:600]
    return ""


def _interrupted(result) -> bool:
    """Whether a failed in-process run failed because it was interrupted (Dagster maps SIGTERM to SIGINT and
    raises ``DagsterExecutionInterruptedError`` in the step; the run itself just fails)."""
    for event in result.all_events:
        error = getattr(event.event_specific_data, "error", None)
        while error is not None:  # the interruption may be the cause or context of the step's error
            if error.cls_name in ("DagsterExecutionInterruptedError", "KeyboardInterrupt"):
                return True
            error = error.cause or error.context
    return False


def _read(database: str, wait_s: float):
    """A read-only connection to ``database`` that waits up to ``wait_s`` for another process's write lock."""
    from envduels_dagster.core.storage.location import Warehouse, is_ducklake
    from envduels_dagster.settings.locations import lake_data_path

    def say(line: str) -> None:
        print(line, flush=True)

    return Warehouse(database, lake_data_path() if is_ducklake(database) else "").connect(
        read_only=True, wait_s=wait_s, on_wait=say)


def leaderboard(database: str, round_: int = 0, wait_s: float = 0.0) -> str:
    """The demo's summary of one round (default 0, the benchmark: original authoring; rounds never pool).

    ``database`` is the warehouse location: a DuckDB file, or the shared profile's DuckLake; ``wait_s``: how
    long to wait for another process that holds the file (``Warehouse.connect``)."""
    with _read(database, wait_s) as conn:
        # One solver ranking, the report's (issue 42): the rankings table's solver_rank (solver_score: success on
        # other authors' environments, averaged within domain, then across domains), not pooled success.
        has_rankings = "rankings" in {t for (t,) in conn.execute("SHOW TABLES").fetchall()}
        rank_of = ("(SELECT min(r.solver_rank) FROM rankings r WHERE r.model = solver AND r.round = ?)"
                   if has_rankings else "CAST(NULL AS DOUBLE)")
        solvers = conn.execute(f"""
            SELECT solver, round(avg(CASE WHEN condition = 'cold' THEN (status = 'success')::INT END), 2) AS cold,
                   round(avg(CASE WHEN condition = 'hinted' THEN (status = 'success')::INT END), 2) AS hinted,
                   {rank_of} AS solver_rank
            FROM episodes WHERE status <> 'incomplete' AND author <> solver AND round = ?
            GROUP BY solver ORDER BY solver_rank NULLS LAST, cold DESC, solver""",
                               [round_, round_] if has_rankings else [round_]).fetchall()
        authors = conn.execute("""
            SELECT e.author, count(*) AS written, sum(valid::INT) AS valid,
                   round(coalesce((SELECT avg(lift) FROM pair_lift p WHERE p.author = e.author
                                   AND p.round = e.round AND NOT p.is_self_pair), 0), 2) AS peer_lift
            FROM environments e WHERE e.round = ? GROUP BY e.author, e.round ORDER BY peer_lift DESC""",
                               [round_]).fetchall()
        training = conn.execute("SELECT learner, count(*) FROM training_set GROUP BY learner ORDER BY 1").fetchall()
    lines = [f"Round {round_}" + (" (the benchmark: original authoring)" if round_ == 0 else ""), "",
             "Solvers (ranked by solver_rank, as in the report: cold success on other authors' environments "
             "averaged per domain; cold/hinted pooled)", f"  {'solver':<12} {'rank':>5} {'cold':>6} {'hinted':>7}"]
    lines += [f"  {s:<12} {'-' if r is None else f'{r:g}':>5} {c:>6.2f} {h:>7.2f}" for s, c, h, r in solvers]
    lines += ["", "Authors (mean hint lift their environments give other solvers)",
              f"  {'author':<12} {'valid':>9} {'peer lift':>10}"]
    lines += [f"  {a:<12} {v:>4}/{w:<4} {lift:>10.2f}" for a, w, v, lift in authors]
    lines += ["", "Training sets (each lineage's newest valid version, any round): " + ", ".join(f"{learner}={n}" for learner, n in training)]
    return "\n".join(lines)


def author_value_answer(database: str, wait_s: float = 0.0) -> str:
    """The practitioner's question first: for each learner, which author to pay (table ``author_value``)."""
    from envduels_dagster.core.value.chart import value_summary

    with _read(database, wait_s) as conn:
        tables = {t for (t,) in conn.execute("SHOW TABLES").fetchall()}
        if "author_value" not in tables:
            return "Which author to pay: author_value was not materialized"
        table = conn.execute("SELECT * FROM author_value ORDER BY learner, author").df()
        mix = conn.execute("SELECT * FROM author_value_mix ORDER BY learner").df()
    lines = ["Which author to pay (learnable environments for each learner, 95% intervals; "
             "prices in models.yaml are illustrative)"]
    return "\n".join(lines + [f"  {line}" for line in value_summary(table, mix)])


def run_demo(envs_per_author: int | None = None, seeds: int | None = None, rounds: int | None = None,
             yes: bool = False) -> int:
    """The whole pipeline on the registry's models; sizes: the flags, else ENVDUELS_ENVS_PER_AUTHOR / ENVDUELS_SEEDS
    / ENVDUELS_ROUNDS, else the experiment's stored settings, else 10, 8 and 1 (envduels_dagster/settings/experiment.py).
    They are stored with the experiment; a later demo that changes them says so and prices it first (``yes``)."""
    import dagster as dg

    from envduels_dagster.cli.experiment_change import settle
    from envduels_dagster.cli.interrupts import quiet_orphan_watchers
    from envduels_dagster.definitions import build_resources
    from envduels_dagster.instance.home import prepare_instance_home
    from envduels_dagster.resources.duel_settings import settings_from_env
    from envduels_dagster.settings import experiment
    from envduels_dagster.settings.locations import envduels_home

    new, sources = experiment.requested({"envs_per_author": envs_per_author, "seeds": seeds, "rounds": rounds})
    # a bad ENVDUELS_* size fails here, before anything is written
    settings_from_env(envs_per_author=new.envs_per_author, benchmark_seeds=list(range(new.seeds)))
    from envduels_dagster.core.models.registry import load_registry
    from envduels_dagster.core.requests.roster import Roster

    Roster.from_registry(load_registry(new.registry))  # so do a bad registry and roles that make no experiment
    settle(new, sources, "envduels demo", yes)  # a change of the stored settings: priced, and asked
    experiment.store(new, "envduels demo")
    settings = settings_from_env()  # the stored sizes, as the daemon's runs will read them
    home = prepare_instance_home()
    quiet_orphan_watchers()  # Ctrl-C: no traceback from Dagster's per-step watcher (interrupts.py)
    t0 = time.perf_counter()
    print(f"EnvDuels demo: ENVDUELS_HOME={envduels_home()}  DAGSTER_HOME={home}", flush=True)
    resources = build_resources(settings=settings)
    with dg.DagsterInstance.get() as instance:
        counts = materialize_all(instance, resources, log=lambda m: print(m, flush=True))
    print(f"\nPipeline done in {time.perf_counter() - t0:.0f}s: {counts['models']} models ({counts['authors']} "
          f"authors, {counts['solvers']} solvers), {counts['pairs']} pairs.\n")
    print_summary(counts)
    if counts.get("budget_stops"):  # the last lines: a cap cut the experiment short (issue 44)
        print(f"\nStopped at the budget cap in {len(counts['budget_stops'])} pair(s); their finished episodes are "
              "kept, the rest are marked stopped_at_budget and excluded from every statistic:")
        for line in counts["budget_stops"]:
            print(f"  {line}")
    return 0


def print_summary(counts: dict, wait_s: float = SUMMARY_WAIT_S) -> None:
    """What the demo prints after its runs: read from the warehouse, which a second demo (or a dbt build) may
    be writing: each read waits up to ``wait_s`` for its lock (issue 33: the second of two concurrent demos
    exited 1 here after all its runs had succeeded), then fails with the CLI's lock message."""
    from envduels_dagster.settings.locations import envduels_home, storage_profile, warehouse_location
    from envduels_dagster.settings.variables import is_set

    print(author_value_answer(warehouse_location(), wait_s) + "\n")
    print(leaderboard(warehouse_location(), wait_s=wait_s))
    with _read(warehouse_location(), wait_s) as conn:
        tables = [t for (t,) in conn.execute("SHOW TABLES").fetchall()]
    shared = storage_profile() == "shared"  # print no password: the DuckLake location holds the Postgres URL
    print(f"\nWarehouse ({'DuckLake' if shared else 'DuckDB'}): {warehouse_location().split('@')[-1]}")
    print(f"  tables: {', '.join(tables)}")
    print(f"Training exports: {envduels_home() / 'exports'}/<learner>/latest "
          "(python: envduels_dagster.api.load_training_set)")
    home_var = f"ENVDUELS_HOME={envduels_home()} " if is_set("ENVDUELS_HOME") else ""
    print(f"Open the Dagster UI on these runs:  {home_var}make ui   (then http://127.0.0.1:3000; "
          f"runs tagged envduels/request={counts.get('request', 'demo-*')})")
    report = envduels_home() / "reports" / "experiment" / "index.html"
    if report.is_file():
        print(f"\nThe experiment report (which author to pay, leaderboard, lift heatmap, ranks, training sets, "
              f"episodes):\n  {report.as_uri()}   (envduels report prints it again)")
