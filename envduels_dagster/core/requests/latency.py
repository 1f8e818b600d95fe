"""How long a model's calls take, as measured, for the plan's hours (issue 41: a default 2 s planned 0.02 h for a
run whose pilot alone took 36 min).

Where it is measured: the pilot times every call it pays for (``TimedGateway``: the provider's time, from the
gateway's reply; cache hits and the wait for a pool slot not counted) and keeps them in its warehouse
(table ``call_latency``: model, stage ``authoring`` or ``play``, seconds). A run's warehouse keeps no call
times, only each episode's wall time; an episode none of whose calls was cached gives a turn's time (its
wall time / its calls, the sandbox's steps included), the fallback for play.

Which figure: an authoring stage waits for the slowest call of each wave (a wave's calls go out together,
then every author's at once), so a plan charges authoring the 90th percentile of its calls; play is a stream
of many calls at the pool's concurrency, so it is charged their median.
"""

from __future__ import annotations

from typing import Any

AUTHORING_PERCENTILE = 0.9
PLAY_PERCENTILE = 0.5
MIN_CALLS = 3  # timed calls before a measured latency replaces the default


class TimedGateway:
    """A gateway that notes each paid call's provider time: (model, stage, seconds) in ``timings``."""

    def __init__(self, gateway: Any):
        self._gateway = gateway
        self.stage = "authoring"
        self.timings: list[tuple[str, str, float]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gateway, name)

    async def chat(self, model: str, messages, *args, **kwargs):
        reply = await self._gateway.chat(model, messages, *args, **kwargs)
        if not reply.cached and reply.latency_s > 0 and not self._in_process(model):
            self.timings.append((model, self.stage, float(reply.latency_s)))
        return reply

    def _in_process(self, model: str) -> bool:
        """A simulated model answers in-process: the plan gives it no call time (its latency is imitated)."""
        registry = getattr(self._gateway, "registry", None)
        return registry is not None and registry.get(model).is_simulated

    def store(self, conn) -> None:
        """Keep the timings in ``conn`` (the pilot's own warehouse)."""
        conn.execute("CREATE OR REPLACE TABLE call_latency (model VARCHAR, stage VARCHAR, latency_s DOUBLE)")
        if self.timings:
            conn.executemany("INSERT INTO call_latency VALUES (?, ?, ?)", self.timings)


def measured_latency(conn, models: set[str]) -> dict[str, dict[str, tuple[float, str]]]:
    """Per model: {"author_latency_s" | "latency_s": (seconds, where it came from)} from ``conn``'s timed calls,
    else (play only) from the turn times of its uncached episodes."""
    tables = {t for (t,) in conn.execute("SELECT table_name FROM information_schema.tables "
                                          "WHERE table_catalog = current_database()").fetchall()}
    out: dict[str, dict[str, tuple[float, str]]] = {}
    if "call_latency" in tables:
        rows = conn.execute("""
            SELECT model, stage, count(*), quantile_cont(latency_s, ?), quantile_cont(latency_s, ?)
            FROM call_latency GROUP BY ALL""", [PLAY_PERCENTILE, AUTHORING_PERCENTILE]).fetchall()
        for model, stage, n, play_s, authoring_s in rows:
            if model in models and n >= MIN_CALLS:
                pct, seconds = (PLAY_PERCENTILE, play_s) if stage == "play" else (AUTHORING_PERCENTILE, authoring_s)
                name = "latency_s" if stage == "play" else "author_latency_s"
                out.setdefault(model, {})[name] = (float(seconds), f"measured ({n} {stage} calls, "
                                                                   f"{_percentile_name(pct)} {seconds:.2f} s)")
    if "episodes" in tables:
        rows = conn.execute("""
            SELECT solver, count(*), quantile_cont(latency_s / model_calls, ?) FROM episodes
            WHERE model_calls > 0 AND cached_calls = 0 AND latency_s > 0 GROUP BY ALL""", [PLAY_PERCENTILE]).fetchall()
        for solver, n, seconds in rows:
            if solver in models and n >= MIN_CALLS and "latency_s" not in out.get(solver, {}):
                out.setdefault(solver, {})["latency_s"] = (float(seconds), f"measured ({n} episodes' turn time, "
                                                                           f"median {seconds:.2f} s)")
    return out


def _percentile_name(p: float) -> str:
    return "median" if p == 0.5 else f"p{round(100 * p)}"
