"""Every author's calls of a round at once before the in-process run's per-author runs (issue 41).

Why a prefetch and not the author runs on threads: Dagster's in-process runs are not thread-safe (tried:
two ``execute_in_process`` on threads deadlock in ``logging.config.dictConfig``, which each run's log
manager calls while another run's handler holds its lock). So ``materialize_all`` first makes every author's
calls of the round together in one event loop, exactly as the authoring asset will make them (same
prompts, seeds and settings, so the same call-cache keys), then runs the per-author runs one after another;
those find their calls in the call cache. Authoring wall time is then about one author's, not the sum (a real
authoring call takes minutes). The calls count against the same budget ledger and provider limits
(one gateway: one pool per provider). Only remote authors are prefetched: a simulated author answers
in-process at once, and prefetching it would only validate its environments twice.

A prefetch that fails says so and lets the runs go on: each run then makes its own calls and fails, or
not, with its own message, as without the prefetch.
"""

from __future__ import annotations

from collections.abc import Callable


def prefetch_authoring(resources: dict, registry, authors: list[str], round_: int,
                       log: Callable[[str], None] = print) -> int:
    """Make ``authors``' round-``round_`` calls at once (round 0: authoring, later: hardening) so the
    per-author runs get them from the call cache; returns how many authors were prefetched."""
    import asyncio

    from envduels_dagster.core.concurrency.gather import gather_or_cancel
    from envduels_dagster.core.models import run_and_close

    remote = [a for a in authors if not registry.get(a).is_simulated]
    if len(remote) < 2 or getattr(resources["gateway"], "registry_path", None) is None:
        return 0
    settings, limits = resources["settings"], resources["sandbox"].limits()
    gw = resources["gateway"].gateway(registry)

    async def one(author: str) -> None:
        if round_ == 0:
            from envduels_dagster.core.authoring.prompts import author_environments

            await author_environments(gw, author, settings.envs_per_author, list(settings.benchmark_seeds), limits,
                                      plan=settings.authoring_plan())
            return
        from envduels_dagster.core.authoring.hardening import harden_author, read_hardening_inputs

        with resources["warehouse"].get_connection() as conn:
            inputs = read_hardening_inputs(conn, author, round_)
        if inputs.parents:
            await harden_author(gw, author, round_, inputs, settings.transcript_budget_chars, limits)

    try:
        asyncio.run(run_and_close(gw, gather_or_cancel(one(a) for a in remote)))
    except Exception as exc:  # noqa: BLE001 - the runs make their own calls and report their own failures
        log(f"[round {round_}] calling the authors at once failed ({type(exc).__name__}: {exc}); each author's "
            "run calls on its own")
        return 0
    log(f"[round {round_}] {len(remote)} authors called at once ({sum(gw.stats.backend_calls.values())} calls); "
        "their runs read them from the call cache")
    return len(remote)
