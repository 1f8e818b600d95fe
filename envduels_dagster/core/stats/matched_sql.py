"""The matched seed as SQL: Python's one definition, shared by the asset checks and ``lift.py``.

Why SQL in a Python module: the checks recompute the marts' figures from raw episodes inside the
warehouse, and ``lift.matched_seeds`` runs the same text on a data frame (through DuckDB), so
redefining "matched seed" is one edit here and one in the dbt macro ``matched_seeds``
(dbt_project/macros/matched_seeds.sql); tests/core/stats/test_matched_sql.py runs both on one
warehouse and asserts the same rows.

A matched seed is one (keys..., seed) whose cold AND hinted episodes both completed (status <>
'incomplete'); ``y_cold`` / ``y_hint`` are 1.0 for success, else 0.0.
"""

from __future__ import annotations

from collections.abc import Sequence

# Seeds committed before any outcome was seen (every fixed-design seed, the adaptive sampler's first
# min_seeds); the marts count only these. The dbt macro committed_seed() is the same condition.
COMMITTED = "coalesce(sampling, 'fixed') <> 'adaptive'"


def matched_seeds_sql(episodes: str, keys: Sequence[str], where: str = "TRUE") -> str:
    """``SELECT <keys>, seed, y_cold, y_hint`` over the table ``episodes``: one row per matched seed.

    ``where``: an extra condition on the episodes (e.g. :data:`COMMITTED`, a solver, ``?`` parameters in
    the order they appear)."""
    k = ", ".join(keys)
    return f"""SELECT {k}, seed,
       max(CASE WHEN condition = 'cold' THEN (status = 'success')::DOUBLE END) AS y_cold,
       max(CASE WHEN condition = 'hinted' THEN (status = 'success')::DOUBLE END) AS y_hint
FROM {episodes}
WHERE status <> 'incomplete' AND ({where})
GROUP BY {k}, seed
HAVING count(*) FILTER (WHERE condition = 'cold') > 0
   AND count(*) FILTER (WHERE condition = 'hinted') > 0"""
