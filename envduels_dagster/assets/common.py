"""Small helpers shared by the asset modules: timestamps and Markdown tables for the UI."""


import datetime as dt

import dagster as dg
import pandas as pd

OWNERS = ["team:envduels"]

# Downstream of pair partitions: update when pairs update, without waiting forever for a
# missing or failed pair (plain eager() includes "no dependency missing", DESIGN §7).
AFTER_PAIRS = dg.AutomationCondition.eager().without(~dg.AutomationCondition.any_deps_missing())


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def markdown_table(df: pd.DataFrame, floatfmt: str = ".2f", max_rows: int = 50) -> str:
    if df.empty:
        return "_no rows_"
    df = df.head(max_rows)
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        cells = [format(v, floatfmt) if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
