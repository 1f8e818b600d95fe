"""A pandas first pass over the check rules: great-expectations runs only where it may fail.

Why (issue 34): the per-pair great-expectations suites cost more than the play itself (217 s of
validation against 93 s of play at 8 models), and on clean data, the normal case, every
expectation passes. Each rule here is answered in plain pandas with the same semantics as the GX
expectation it names (missing values ignored where GX ignores them, ``isin``/comparisons/regex as GX's
pandas execution engine computes them). The answer is one-sided: :func:`surely_passes` returns True
only when GX would pass the rule too (as GX does, an empty selection passes every rule and a column
without values every rule that ignores missing values); anything else (a violation, an expectation or
argument not mirrored here, a dtype GX might refuse) returns False and the rule goes to GX,
whose verdict, counts, samples and messages are then exactly as before. A test runs both over every
rule and many frames and requires a pandas pass to imply a GX pass.

Imports pandas only when called (loading the definitions imports no pandas).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def _nonnull(df: pd.DataFrame, column: str) -> pd.Series:
    return df[column][df[column].notna()]


def _in_set(df, column, value_set):
    return bool(_nonnull(df, column).isin(list(value_set)).all())


def _not_in_set(df, column, value_set):
    return not bool(_nonnull(df, column).isin(list(value_set)).any())


def _between(df, column, min_value=None, max_value=None, strict_min=False, strict_max=False):
    import pandas as pd

    values = _nonnull(df, column)
    if min_value is None and max_value is None:
        return False  # GX refuses it
    if len(values) == 0:
        return True
    if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        return False  # GX decides (it may error on these)
    for bound in (min_value, max_value):
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int | float)):
            return False
    ok = pd.Series(True, index=values.index)
    if min_value is not None:
        ok &= values > min_value if strict_min else values >= min_value
    if max_value is not None:
        ok &= values < max_value if strict_max else values <= max_value
    return bool(ok.all())


def _regex(df, column, regex, negate=False):
    values = _nonnull(df, column)
    if len(values) == 0:
        return True
    if not all(isinstance(v, str) for v in values):
        return False
    hits = values.str.contains(regex, regex=True)
    return bool((~hits if negate else hits).all())


def _null(df, column):
    return bool(df[column].isna().all())


def _not_null(df, column):
    return bool(df[column].notna().all())


def _unique(df, column):
    return not bool(_nonnull(df, column).duplicated(keep=False).any())


def _compound_unique(df, column_list):
    return not bool(df[list(column_list)].duplicated(keep=False).any())  # GX ignores all-missing rows: fewer


def _both_present(df, column_A, column_B):
    """The rows where both columns have a value (GX ignores rows missing both); None when a row misses only one
    (GX's handling of those is left to GX)."""
    a, b = df[column_A].isna(), df[column_B].isna()
    if bool((a ^ b).any()):
        return None
    return df[~(a & b)]


def _pair_equal(df, column_A, column_B):
    rows = _both_present(df, column_A, column_B)
    return rows is not None and bool((rows[column_A] == rows[column_B]).all())


def _a_greater(df, column_A, column_B, or_equal=False):
    import pandas as pd

    rows = _both_present(df, column_A, column_B)
    if rows is None:
        return False
    a, b = rows[column_A], rows[column_B]
    if len(rows) and not all(pd.api.types.is_numeric_dtype(c) and not pd.api.types.is_bool_dtype(c) for c in (a, b)):
        return False
    return bool((a >= b if or_equal else a > b).all())


# expectation class name -> (the pandas answer, the keyword arguments it mirrors)
_ANSWERS: dict[str, tuple[Callable[..., bool], frozenset[str]]] = {
    "ExpectColumnValuesToBeInSet": (_in_set, frozenset({"column", "value_set"})),
    "ExpectColumnValuesToNotBeInSet": (_not_in_set, frozenset({"column", "value_set"})),
    "ExpectColumnValuesToBeBetween": (_between, frozenset({"column", "min_value", "max_value", "strict_min",
                                                           "strict_max"})),
    "ExpectColumnValuesToMatchRegex": (_regex, frozenset({"column", "regex"})),
    "ExpectColumnValuesToNotMatchRegex": (lambda df, column, regex: _regex(df, column, regex, negate=True),
                                          frozenset({"column", "regex"})),
    "ExpectColumnValuesToBeNull": (_null, frozenset({"column"})),
    "ExpectColumnValuesToNotBeNull": (_not_null, frozenset({"column"})),
    "ExpectColumnValuesToBeUnique": (_unique, frozenset({"column"})),
    "ExpectCompoundColumnsToBeUnique": (_compound_unique, frozenset({"column_list"})),
    "ExpectColumnPairValuesToBeEqual": (_pair_equal, frozenset({"column_A", "column_B"})),
    "ExpectColumnPairValuesAToBeGreaterThanB": (_a_greater, frozenset({"column_A", "column_B", "or_equal"})),
}


def mirrored(expectation: str) -> bool:
    return expectation in _ANSWERS


def surely_passes(expectation: str, kwargs: dict[str, Any], rows: pd.DataFrame) -> bool:
    """True only if the GX expectation ``expectation(**kwargs)`` passes on ``rows``; False means "ask GX"."""
    answer = _ANSWERS.get(expectation)
    if answer is None or not set(kwargs) <= answer[1]:
        return False
    try:
        return bool(answer[0](rows, **kwargs))
    except Exception:  # a column or dtype this pass cannot judge: GX decides, and reports any error itself
        return False
