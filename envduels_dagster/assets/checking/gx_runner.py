"""Run great-expectations 1.x suites inside Dagster asset checks and map the outcome to check results.

Why not dagster-ge: it requires great-expectations < 1.0 (DESIGN §7). Why this shape:
the check modules describe *rules* (a GX expectation class name, its arguments, the
asset check it belongs to and a sentence saying what must hold) without importing GX;
this module imports GX once per process, keeps one ephemeral context and one pandas
data source, validates each frame with one ``ExpectationSuite``, and turns each rule's
result into readable ``AssetCheckResult`` metadata: success, statistics and the failing
expectations with sample unexpected values (identified by index columns such as
``env_id``/``seed``) so the Dagster UI explains a failure without opening the warehouse.

GX is imported lazily: it costs seconds, and Definitions must load fast.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import dagster as dg

from envduels_dagster.assets.checking.fast_rules import surely_passes

if TYPE_CHECKING:
    import pandas as pd

SAMPLE_SIZE = 5  # unexpected values kept per failing expectation
_LOCK = threading.RLock()
_STATE: dict[str, Any] = {}  # module, context, data source and batch definitions, created once per process
_STATS = {"gx_rules": 0}  # rules the pandas pass sent on to GX in this process (benchmarks, tests)


@dataclass(frozen=True)
class Rule:
    """One expectation, tied to the asset check (``check``) it belongs to.

    ``expectation`` is a GX class name from ``great_expectations.expectations``;
    ``message`` says what must hold, in words, and leads the failure description.
    A rule whose ``requires`` columns are absent from the frame is skipped (and
    reported as skipped), so checks survive optional columns going missing.
    ``where`` restricts the rule to rows matching all of its ``(column, op, value)``
    clauses (op: ``==``, ``!=`` or ``in``), like a GX row condition.
    """

    check: str
    expectation: str
    kwargs: dict = field(default_factory=dict)
    message: str = ""
    requires: tuple[str, ...] = ()
    where: tuple[tuple[str, str, Any], ...] = ()


@dataclass
class Frame:
    """A DataFrame validated as one GX batch with one suite; ``index`` names identify failing rows."""

    name: str
    df: pd.DataFrame
    rules: list[Rule]
    index: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    rule: Rule
    frame: str
    success: bool
    frame_rows: int = 0
    element_count: int = 0
    unexpected_count: int = 0
    sample: list[str] = field(default_factory=list)
    observed: Any = None
    error: str | None = None
    skipped: str | None = None

    @property
    def expectation_type(self) -> str:
        name = self.rule.expectation
        return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


def gx():
    """The great_expectations module, imported once (analytics off, before the import)."""
    with _LOCK:
        if "gx" not in _STATE:
            os.environ["GX_ANALYTICS_ENABLED"] = "False"
            import great_expectations  # noqa: PLC0415 - deliberately lazy (import costs seconds)

            _STATE["gx"] = great_expectations
        return _STATE["gx"]


def _batch_definition(frame_name: str):
    with _LOCK:
        if "context" not in _STATE:
            module = gx()
            from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: PLC0415

            context = module.get_context(mode="ephemeral")
            context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
            _STATE["context"] = context
            _STATE["source"] = context.data_sources.add_pandas("envduels_checks")
            _STATE["batches"] = {}
        batches = _STATE["batches"]
        if frame_name not in batches:
            asset = _STATE["source"].add_dataframe_asset(frame_name)
            batches[frame_name] = asset.add_batch_definition_whole_dataframe("whole")
        return batches[frame_name]


def gx_version() -> str:
    """The installed great_expectations version, read from its package metadata (no import of GX)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("great_expectations")
    except PackageNotFoundError:
        return getattr(gx(), "__version__", "?")


# Expectations that ignore missing values: a ``where`` rule of these kinds runs in the shared first
# pass on a copy of its column with the rows outside the condition blanked out.
_MASKABLE = {"ExpectColumnValuesToBeInSet", "ExpectColumnValuesToNotBeInSet", "ExpectColumnValuesToBeBetween",
             "ExpectColumnValuesToMatchRegex", "ExpectColumnValuesToNotMatchRegex", "ExpectColumnValuesToBeNull"}
BOOLEAN_ONLY = {"result_format": "BOOLEAN_ONLY"}


PANDAS_FIRST = True  # False: every rule goes to GX, as before issue 34 (the benchmark's "before", the tests' reference)


def validate(suite: str, frames: list[Frame], pandas_first: bool | None = None) -> list[Outcome]:
    """Validate every frame with one suite each; one Outcome per rule, in rule order.

    ``pandas_first`` (issue 34): each rule is first answered in pandas (``fast_rules.surely_passes``,
    one-sided: True only where GX passes too); only the rules it cannot pass reach GX, below, so clean
    data never imports or runs GX and a failure is reported by GX exactly as before.

    Two passes keep clean data cheap. First the whole suite runs once with result format
    BOOLEAN_ONLY (about 4x faster than SUMMARY); a ``where`` rule joins it on a copy of
    its column blanked outside the condition. Then only the expectations that failed run
    again, on exactly the rows their condition selects (filtered in pandas: GX's own row
    conditions re-run a ``DataFrame.query`` per metric, ~0.1 s per expectation), with
    result format SUMMARY and the frame's index columns, for counts and sample values.
    """
    outcomes: list[Outcome] = []
    pandas_first = PANDAS_FIRST if pandas_first is None else pandas_first
    with _LOCK:
        for frame in frames:
            df = frame.df.reset_index(drop=True)
            index = [c for c in frame.index if c in df.columns]
            detail: dict[str, Any] = {"result_format": "SUMMARY", "partial_unexpected_count": SAMPLE_SIZE}
            if index:
                detail["unexpected_index_column_names"] = index
            by_id: dict[int, Outcome] = {}
            first: dict[int, dict] = {}  # rule id -> its kwargs in the first pass
            masks: dict[str, pd.Series] = {}
            fast = df.copy(deep=False)
            for i, rule in enumerate(frame.rules):
                missing = [c for c in (*rule.requires, *(w[0] for w in rule.where)) if c not in df.columns]
                if missing:
                    by_id[i] = Outcome(rule, frame.name, True, frame_rows=len(df),
                                       skipped=f"column(s) {', '.join(missing)} absent")
                    continue
                if rule.where:
                    masks.setdefault(repr(rule.where), _mask(df, rule.where))
                if pandas_first:  # the pandas pass: a rule it surely passes never reaches GX
                    rows = df[masks[repr(rule.where)]] if rule.where else df
                    if surely_passes(rule.expectation, rule.kwargs, rows):
                        by_id[i] = Outcome(rule, frame.name, True, frame_rows=len(df), element_count=len(rows))
                        continue
                    _STATS["gx_rules"] += 1
                if not rule.where:
                    first[i] = rule.kwargs
                elif rule.expectation in _MASKABLE and "column" in rule.kwargs:
                    fast[f"__where_{i}"] = df[rule.kwargs["column"]].where(masks[repr(rule.where)])
                    first[i] = {**rule.kwargs, "column": f"__where_{i}"}
            quick: dict[int, Any] = {}
            if len(by_id) == len(frame.rules):
                outcomes += [by_id[i] for i in range(len(frame.rules))]
                continue  # every rule decided without GX
            if first:
                batch = _batch_definition(frame.name).get_batch(batch_parameters={"dataframe": fast})
                quick = _run(batch, f"{suite}.{frame.name}", frame.rules, list(first), BOOLEAN_ONLY, first)
            # the other where-rules, and every failure, run on exactly the rows their condition selects
            groups: dict[str, tuple[tuple, list[int]]] = {}
            for i, rule in enumerate(frame.rules):
                if i in by_id:
                    continue
                if i in quick and quick[i].success:
                    rows = int(masks[repr(rule.where)].sum()) if rule.where else len(df)
                    by_id[i] = Outcome(rule, frame.name, True, frame_rows=len(df), element_count=rows)
                else:
                    groups.setdefault(repr(rule.where), (rule.where, []))[1].append(i)
            for where, ids in groups.values():
                rows = df[masks[repr(where)]].reset_index(drop=True) if where else df
                batch = _batch_definition(frame.name).get_batch(batch_parameters={"dataframe": rows})
                pending = [i for i in ids if i in quick]  # known to fail already
                unknown = [i for i in ids if i not in quick]
                if unknown:
                    for i, r in _run(batch, f"{suite}.{frame.name}", frame.rules, unknown, BOOLEAN_ONLY).items():
                        if r.success:
                            by_id[i] = Outcome(frame.rules[i], frame.name, True, frame_rows=len(df),
                                               element_count=len(rows))
                        else:
                            pending.append(i)
                if pending:
                    for i, r in _run(batch, f"{suite}.{frame.name}", frame.rules, pending, detail).items():
                        by_id[i] = _outcome(frame.rules[i], frame.name, r, len(df), index)
            outcomes += [by_id[i] for i in range(len(frame.rules))]
    return outcomes


def _run(batch, name: str, rules: list[Rule], ids: list[int], result_format: dict,
         kwargs: dict[int, dict] | None = None) -> dict[int, Any]:
    """Validate the rules ``ids`` as one ExpectationSuite; results by rule id (``kwargs`` overrides per id)."""
    import great_expectations.expectations as gxe  # noqa: PLC0415 - loaded by gx() already

    expectations = [getattr(gxe, rules[i].expectation)(**(kwargs or {}).get(i, rules[i].kwargs), meta={"rule": i},
                                                         description=rules[i].message or None) for i in ids]
    result = batch.validate(gx().ExpectationSuite(name=name, expectations=expectations), result_format=result_format)
    return {int((r.expectation_config.meta or {})["rule"]): r for r in result.results}


def _mask(df: pd.DataFrame, where: tuple) -> pd.Series:
    import pandas as pd

    mask = pd.Series(True, index=df.index)
    for column, op, value in where:
        col = df[column]
        clause = col.isin(list(value)) if op == "in" else (col == value) if op == "==" else (col != value)
        mask &= clause.fillna(False).astype(bool)
    return mask


def _outcome(rule: Rule, frame: str, r, rows: int, index: list[str]) -> Outcome:
    res = dict(r.result or {})
    exc = r.exception_info or {}
    if isinstance(exc, dict) and exc.get("raised_exception"):
        return Outcome(rule, frame, False, frame_rows=rows, error=str(exc.get("exception_message")))
    sample = [_format_sample(x, index) for x in (res.get("partial_unexpected_index_list")
                                         or res.get("partial_unexpected_list") or [])][:SAMPLE_SIZE]
    return Outcome(rule, frame, bool(r.success), frame_rows=rows, element_count=int(res.get("element_count") or 0),
                   unexpected_count=int(res.get("unexpected_count", 0) or 0), sample=sample,
                   observed=res.get("observed_value"))


def _short(v: Any, width: int = 64) -> str:
    if hasattr(v, "item"):  # numpy scalar
        v = v.item()
    if isinstance(v, float):
        s = f"{v:.4g}"
    else:
        s = str(v)
    return s if len(s) <= width else s[: width - 1] + "…"


def _format_sample(x: Any, index: list[str] | None = None) -> str:
    if isinstance(x, dict):  # identifying (index) columns first, then the checked value(s)
        keys = [k for k in (index or []) if k in x] + [k for k in x if k not in (index or [])]
        return ", ".join(f"{k}={_short(x[k])}" for k in keys)
    if isinstance(x, (tuple, list)):
        return "(" + ", ".join(_short(v) for v in x) + ")"
    return _short(x)


def _describe_failure(o: Outcome) -> str:
    if o.error:
        return f"{o.rule.message}: could not be evaluated ({_short(o.error, 160)})"
    if o.unexpected_count:
        text = f"{o.rule.message}: {o.unexpected_count} of {o.element_count} rows violate it"
        return text + (f", e.g. [{o.sample[0]}]" if o.sample else "")
    return f"{o.rule.message}: failed" + (f" (observed {_short(o.observed, 80)})" if o.observed is not None else "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


@dataclass(frozen=True)
class SuiteRun:
    """One run of a suite, as every check result of it reports it: the suite's name, the partition it checked
    (None: unpartitioned) and the seconds it took (None: not timed)."""

    suite: str
    partition: str | None = None
    seconds: float | None = None


def check_results(asset_key: dg.AssetKey, check_names: list[str], outcomes: list[Outcome], run: SuiteRun, *,
                  warn: frozenset[str] | set[str] = frozenset(),
                  extra: dict[str, dict[str, Any]] | None = None) -> list[dg.AssetCheckResult]:
    """One AssetCheckResult per check name, from the outcomes of the rules tagged with it.

    ``warn``: checks whose failure is a warning (AssetCheckSeverity.WARN), not an error.
    ``extra``: additional metadata per check name.
    """
    suite, partition, seconds = run.suite, run.partition, run.seconds
    results = []
    version = gx_version()
    for name in check_names:
        mine = [o for o in outcomes if o.rule.check == name]
        failed = [o for o in mine if not o.success]
        evaluated = [o for o in mine if not o.skipped]
        rows = max((o.frame_rows for o in mine), default=0)
        stats = {"evaluated_expectations": len(evaluated), "successful_expectations": len(evaluated) - len(failed),
                 "unsuccessful_expectations": len(failed),
                 "success_percent": round(100.0 * (len(evaluated) - len(failed)) / len(evaluated), 1)
                 if evaluated else 100.0,
                 "skipped_expectations": len(mine) - len(evaluated)}
        lines = ["| what must hold | expectation | result | unexpected | sample |", "|---|---|---|---|---|"]
        for o in mine:
            verdict = "skipped" if o.skipped else "error" if o.error else "pass" if o.success else "**FAIL**"
            sample = o.skipped or o.error or "; ".join(o.sample[:2])
            lines.append(f"| {_cell(o.rule.message)} | `{o.expectation_type}` | {verdict} | "
                         f"{o.unexpected_count}/{o.element_count} | {_cell(sample)} |")
        metadata: dict[str, Any] = {
            "success": not failed,
            "rows_checked": rows,
            "statistics": dg.MetadataValue.json(stats),
            "expectations": dg.MetadataValue.md("\n".join(lines)),
            "suite": f"{suite} (great_expectations {version})",
        }
        if partition is not None:
            metadata["partition"] = partition
        if seconds is not None:
            metadata["suite_seconds"] = round(seconds, 3)
        if failed:
            md = []
            for o in failed:
                md.append(f"**{o.rule.message}** (`{o.expectation_type}` on `{o.frame}`)  \n"
                          + (f"error: {o.error}" if o.error else
                             f"{o.unexpected_count} of {o.element_count} rows unexpected")
                          + "".join(f"\n- `{s}`" for s in o.sample))
            metadata["failing_expectations"] = dg.MetadataValue.md("\n\n".join(md))
            metadata["unexpected_samples"] = dg.MetadataValue.json(
                {o.rule.message: {"expectation": o.expectation_type, "unexpected_count": o.unexpected_count,
                                  "element_count": o.element_count, "sample": o.sample, "error": o.error}
                 for o in failed})
        metadata.update((extra or {}).get(name, {}))
        if failed:
            description = "; ".join(_describe_failure(o) for o in failed)
        else:
            description = (f"{len(evaluated)} expectation(s) passed on {rows} row(s)"
                           + (f"; {len(mine) - len(evaluated)} skipped" if len(mine) > len(evaluated) else ""))
        severity = dg.AssetCheckSeverity.WARN if name in warn else dg.AssetCheckSeverity.ERROR
        results.append(dg.AssetCheckResult(asset_key=asset_key, check_name=name, passed=not failed,
                                           severity=severity, description=description, metadata=metadata))
    return results


def failed_results(asset_key: dg.AssetKey, check_names: list[str], message: str, *,
                   partition: str | None = None) -> list[dg.AssetCheckResult]:
    """Every check fails with ``message`` (e.g. the table it guards does not exist)."""
    meta: dict[str, Any] = {"success": False}
    if partition is not None:
        meta["partition"] = partition
    return [dg.AssetCheckResult(asset_key=asset_key, check_name=n, passed=False, description=message, metadata=meta)
            for n in check_names]


def run_suite(asset_key: dg.AssetKey, check_names: list[str], suite: str, frames: list[Frame],
              partition: str | None = None, **kwargs: Any) -> list[dg.AssetCheckResult]:
    """Validate ``frames`` and map the outcomes to one result per check name (``kwargs``: ``check_results``'s
    ``warn`` and ``extra``)."""
    t0 = time.perf_counter()
    outcomes = validate(suite, frames)
    return check_results(asset_key, check_names, outcomes, SuiteRun(suite, partition, time.perf_counter() - t0),
                         **kwargs)
