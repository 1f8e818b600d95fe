"""What every area shares: owners, the automation condition downstream of pairs, UI helpers.

Why here: one definition of "refresh after pairs land" for every asset that reads
pair partitions, and one timestamp convention (naive UTC) for warehouse rows.
"""

import datetime as dt

import dagster as dg

from envduels_dagster.core.reporting import markdown_table

__all__ = ["AFTER_PAIRS", "OWNERS", "markdown_table", "utcnow"]

OWNERS = ["team:envduels"]

# Downstream of pair partitions: update when pairs update, without waiting forever for a
# missing or failed pair (plain eager() includes "no dependency missing", DESIGN §7).
AFTER_PAIRS = dg.AutomationCondition.eager().without(~dg.AutomationCondition.any_deps_missing())


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
