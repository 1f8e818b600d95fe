"""Numbers for people: an estimate and its interval rounded to what the interval justifies.

Why one rule in one place: the metadata tables (``rankings``, ``author_value``, ``training_set``) and the experiment
report printed every float to a fixed 3 decimals, so ``0.521 [0.013, 0.987]`` claimed a precision its interval
denies and ``1234.567 [1200.1, 1270.9]`` cluttered. The rule, as in physics' reporting conventions:

* the half-width ``h = |upper - lower| / 2`` is rounded to one significant digit, or two when that digit is a 1
  (so 0.14 keeps 0.14 rather than the 30% coarser 0.1); the estimate and both bounds get the same decimals
  (``0.52 [0.37, 0.67]``; ``0.5 [0.0, 1.0]`` for a half-width of 0.5; ``1230 [1200, 1270]`` for 35);
* except that a bound which is not zero never prints as 0 (a positive lower bound is evidence): when it would, all
  three get the decimals that keep that bound's first significant digit (``320 [40, 800]`` for 319 [42.5, 798],
  not ``300 [0, 800]``; issue 42);
* without a usable interval (a bound missing, NaN or infinite, or zero width) a value keeps ``PLAIN_DIGITS``
  decimals below 1000 and none from there (the display rule used before this module);
* a missing value (None, NaN, pandas NA, infinity) is None, never a number.

Storage keeps full precision: this is for display only. Pure Python, no Dagster.
"""

from __future__ import annotations

import math
from typing import Any

PLAIN_DIGITS = 3
MAX_DECIMALS = 12  # a half-width below 1e-12 is treated as zero width (the plain rule applies)


def as_float(value: Any) -> float | None:
    """``value`` as a finite Python float, or None (None, NaN, NA, infinities, non-numbers)."""
    if value is None or isinstance(value, bool | str):
        return None
    try:
        v = float(value.item() if hasattr(value, "item") else value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def interval_decimals(lower: Any, upper: Any) -> int | None:
    """Decimals the interval [lower, upper] justifies (negative: round to tens, hundreds, ...); None when it gives
    none (a bound missing or not finite, or zero width)."""
    lo, hi = as_float(lower), as_float(upper)
    if lo is None or hi is None:
        return None
    half = abs(hi - lo) / 2
    if half < 10.0 ** -MAX_DECIMALS:
        return None
    exponent = math.floor(math.log10(half))
    leading = int(half / 10.0 ** exponent + 1e-9)  # the first significant digit, 1..9
    if leading >= 10:  # log10 rounding at an exact power of ten
        exponent, leading = exponent + 1, 1
    decimals = -exponent + (1 if leading == 1 else 0)
    for bound in (lo, hi):  # a bound that is not zero never prints as 0: it keeps its first significant digit
        if bound != 0 and round(bound, decimals) == 0:
            decimals = max(decimals, -math.floor(math.log10(abs(bound))))
    return decimals


def round_plain(value: Any, digits: int = PLAIN_DIGITS) -> float | None:
    """A value without an interval: ``digits`` decimals below 1000, none from there; None when missing."""
    v = as_float(value)
    if v is None:
        return None
    return round(v, digits) if abs(v) < 1000 else float(round(v))


def round_to(value: Any, decimals: int | None) -> float | None:
    v = as_float(value)
    if v is None:
        return None
    if decimals is None:
        return round_plain(v)
    out = round(v, decimals)
    return out + 0.0  # -0.0 reads as 0.0


def round_estimate(estimate: Any, lower: Any, upper: Any) -> tuple[float | None, float | None, float | None]:
    """(estimate, lower, upper), all rounded to the decimals the interval justifies (see the module doc)."""
    decimals = interval_decimals(lower, upper)
    return round_to(estimate, decimals), round_to(lower, decimals), round_to(upper, decimals)


def format_estimate(estimate: Any, lower: Any = None, upper: Any = None, missing: str = "n/a") -> str:
    """``"0.52 [0.37, 0.67]"``: the estimate and its interval as text by the same rule; the estimate alone without
    an interval; ``missing`` without an estimate."""
    decimals = interval_decimals(lower, upper)
    e = round_to(estimate, decimals)
    if e is None:
        return missing
    if decimals is None:
        text = _text(e, None)
        return text if as_float(lower) is None or as_float(upper) is None else \
            f"{text} [{_text(round_plain(lower), None)}, {_text(round_plain(upper), None)}]"
    return f"{_text(e, decimals)} [{_text(round_to(lower, decimals), decimals)}, {_text(round_to(upper, decimals), decimals)}]"


def _text(value: float | None, decimals: int | None) -> str:
    if value is None:
        return "n/a"
    if decimals is None:
        return f"{value:g}" if abs(value) < 1e6 else f"{value:.0f}"
    return f"{value:.{max(decimals, 0)}f}"


def interval_columns(columns: list[str]) -> dict[str, tuple[str, str]]:
    """Which interval rounds each estimate column of a table, by the project's column names: ``X`` by
    ``X_ci_lower/X_ci_upper`` (the published t interval) when present, else ``X_lower/X_upper``. The bounds of
    every interval of ``X`` (``X_lower``, ``X_ci_upper``, ``X_population_lower``, ...) take ``X``'s decimals."""
    names = set(columns)
    out = {}
    for name in columns:
        for lo, hi in ((f"{name}_ci_lower", f"{name}_ci_upper"), (f"{name}_lower", f"{name}_upper")):
            if lo in names and hi in names:
                out[name] = (lo, hi)
                break
    return out


def round_row(row: dict[str, Any], intervals: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """A table row for display: each estimate of ``intervals`` and every bound of it (``X_lower``, ``X_ci_upper``,
    ``X_population_lower``, ...; a bound belongs to the longest estimate name it starts with) rounded by its
    interval; every other float by the plain rule, missing ones as None; integers, text and the rest unchanged."""
    def owner(col: str) -> str | None:
        if col in intervals:
            return col
        owners = [e for e in intervals if col.startswith(f"{e}_") and col.endswith(("_lower", "_upper"))]
        return max(owners, key=len) if owners else None

    decimals = {est: interval_decimals(row.get(lo), row.get(hi)) for est, (lo, hi) in intervals.items()}
    out = {}
    for col, value in row.items():
        if not _is_float(value):
            out[col] = value
            continue
        est = owner(col)
        out[col] = round_plain(value) if est is None else round_to(value, decimals[est])
    return out


def _is_float(value: Any) -> bool:
    """A float-valued cell (Python or numpy float, NaN included); not an int, a bool, None or pandas NA."""
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return True
    return getattr(getattr(value, "dtype", None), "kind", "") == "f"
