"""What every area shares: owners, the export's automation condition, UI helpers.

Why here: one definition of "publish only what passed its blocking checks", and one timestamp
convention (naive UTC) for warehouse rows.
"""

import datetime as dt

import dagster as dg

from envduels_dagster.core.reporting import markdown_table

__all__ = ["AFTER_CHECKED_TRAINING_SET", "OWNERS", "markdown_table", "utcnow"]

OWNERS = ["team:envduels"]

# The export follows a training set materialized outside a request (by hand in the UI) only once the set's
# BLOCKING checks passed: eager() alone waits for materializations, not for checks, and would publish a set
# that failed them (NOTES-dagster). Marts, rankings and training sets have no automation condition:
# envduels_requests refreshes them once per request, after every partition of it landed.
AFTER_CHECKED_TRAINING_SET = (dg.AutomationCondition.eager()
                              & dg.AutomationCondition.all_deps_blocking_checks_passed())


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)
