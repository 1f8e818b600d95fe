"""Data checks of the four Python result assets: ``rankings``, ``design_convergence``, ``authoring_progress``,
``lift_learning``.

Why: these tables reach the UI and the paper's figures, and they had no checks. The rules live in
``core/checks/results.py`` (tested on bad tables); here each check reads its table and reports the
problems. Not blocking: no asset downstream consumes these tables, but a failure is an ERROR in the UI.
``authoring_progress`` and ``lift_learning`` publish their headline figures (skill -> improvement, lift ->
learning) as metadata, not tables: their checks also read the latest materialization's metadata.
``rankings`` is also published for other teams (``consumer.RANKINGS``): its checks are the publish step
of its snapshot, which readers see only once all of them passed (``assets.shared.publish_if_passed``).
"""

from collections.abc import Callable
from typing import Any

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.checking.catalog import Catalog, spec

DESCRIPTIONS = {
    "ranks_within_1_to_n": "Every rank and rank bound is within 1..n (n = models ranked).",
    "intervals_ordered": "Every interval has lower <= upper, both bounds or neither, and never a bound without "
                         "its estimate.",
    "no_nan_published": "No NaN where a number is published (scores, strengths, p-values, changes); "
                        "a withheld interval gives its reason.",
    "sample_sizes_reported": "The sample sizes behind the figures are present and plausible.",
}
NAMES = {
    "rankings": ["ranks_within_1_to_n", "intervals_ordered", "no_nan_published", "sample_sizes_reported"],
    "design_convergence": ["intervals_ordered", "no_nan_published", "sample_sizes_reported"],
    "authoring_progress": ["intervals_ordered", "no_nan_published", "sample_sizes_reported"],
    "lift_learning": ["no_nan_published", "sample_sizes_reported"],
}


#: Result assets that also publish figures as metadata (read from their latest materialization and checked),
#: with the core.checks.results rule that judges them.
FIGURES = {"authoring_progress": "progress_figure_problems", "lift_learning": "learning_figure_problems"}


def latest_figures(instance: dg.DagsterInstance, asset: str) -> dict | None:
    """The metadata values of ``asset``'s latest materialization (None when it has none)."""
    event = instance.get_latest_materialization_event(dg.AssetKey(asset))
    if event is None or event.asset_materialization is None:
        return None
    return {k: v.value for k, v in event.asset_materialization.metadata.items()}


def results_for(asset: str, conn, figures: dict | None = None) -> list[dg.AssetCheckResult]:
    """Evaluate the checks of ``asset`` on the warehouse behind ``conn`` (a missing table fails them all); for
    the assets in FIGURES also on the figures its latest materialization published (``figures``)."""
    from envduels_dagster.core.checks import results as rc

    cat = Catalog(conn)
    key = dg.AssetKey(asset)
    tables = {"rankings": ["rankings", "rankings_summary"]}.get(asset, [asset])
    names = [cat.table(t) for t in tables]
    if any(n is None for n in names):
        missing = tables[names.index(None)]
        return [dg.AssetCheckResult(asset_key=key, check_name=c, passed=False,
                                    description=f"table {missing} is missing: materialize {asset}")
                for c in NAMES[asset]]
    frames = [conn.execute(f"SELECT * FROM {n}").df() for n in names]
    judges: dict[str, Callable[..., Any]] = {
        "rankings": rc.rankings_problems, "design_convergence": rc.design_convergence_problems,
        "authoring_progress": rc.authoring_progress_problems, "lift_learning": rc.lift_learning_problems}
    problems = judges[asset](*frames)
    if asset in FIGURES:
        extra = getattr(rc, FIGURES[asset])(figures, frames[0])
        for name, found in extra.items():
            problems[name] = [*problems[name], *found]
    return [dg.AssetCheckResult(asset_key=key, check_name=c, passed=not problems[c],
                                severity=dg.AssetCheckSeverity.ERROR,
                                description="; ".join(problems[c])[:2000] or "ok",
                                metadata={"rows": len(frames[0]), "problems": len(problems[c])})
            for c in NAMES[asset]]


PUBLISHED = {"rankings"}  # result tables with a published snapshot (consumer.RANKINGS): their checks publish it


def make_result_checks(asset: str) -> dg.AssetChecksDefinition:
    specs = [spec(c, dg.AssetKey(asset), DESCRIPTIONS[c]) for c in NAMES[asset]]
    description = f"Rules of the published table `{asset}` (core/checks/results.py)."
    if asset in PUBLISHED:
        from envduels_dagster.assets.shared import publish_if_passed
        from envduels_dagster.resources.io_managers import PublishedTableIOManager

        @dg.multi_asset_check(specs=specs, name=f"{asset}_result_checks", description=description + (
            " Write-audit-publish: the table's staged snapshot is published only when all of them pass."))
        def _published_checks(context: dg.AssetCheckExecutionContext, warehouse: DuckDBResource,
                              envduels_published: dg.ResourceParam[PublishedTableIOManager]):
            with warehouse.get_connection() as conn:
                results = results_for(asset, conn)
            yield from publish_if_passed(context, envduels_published, dg.AssetKey(asset), results, NAMES[asset])

        return _published_checks

    if asset in FIGURES:
        description += " Also the figures its latest materialization published as metadata (core/checks/results.py)."

    @dg.multi_asset_check(specs=specs, name=f"{asset}_result_checks", description=description)
    def _checks(context: dg.AssetCheckExecutionContext, warehouse: DuckDBResource):
        figures = latest_figures(context.instance, asset) if asset in FIGURES else None
        with warehouse.get_connection() as conn:
            results = results_for(asset, conn, figures)
        yield from results

    return _checks
