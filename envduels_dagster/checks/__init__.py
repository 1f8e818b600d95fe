"""Data checks (great-expectations suites run inside Dagster asset checks).

``ALL_CHECKS`` is what ``definitions.py`` loads; add new check modules here.

One ``multi_asset_check`` per asset: it reads the rows it guards from the warehouse
once (for partitioned assets only the partition just materialized), validates them
with one great-expectations suite, and reports several named checks so the UI shows
what failed. great-expectations is imported lazily, on the first check that runs
(``gx_runner``), never when Definitions load. The ``training_set`` checks are
blocking: a failure stops every downstream step of the run.

The environments and episodes suites also guard the co-evolution rounds' assets
(``hardened_environments_r{r}``, ``duel_episodes_r{r}``), which write round r of the
same tables; they are found in ``ALL_ASSETS`` by name, so ENVDUELS_ROUNDS is honoured.
"""

import re

from envduels_dagster.assets import ALL_ASSETS
from envduels_dagster.checks.environments import make_environments_checks
from envduels_dagster.checks.export import training_export_checks
from envduels_dagster.checks.episodes import make_episodes_checks
from envduels_dagster.checks.marts import pair_lift_checks
from envduels_dagster.checks.registry import model_registry_checks
from envduels_dagster.checks.training import training_set_checks
from envduels_dagster.checks.value import author_value_checks

_ROUND_ASSET = re.compile(r"^(authored_environments|hardened_environments_r(\d+)|duel_episodes(?:_r(\d+))?)$")


def _round_checks() -> list:
    checks = []
    for asset in ALL_ASSETS:
        m = _ROUND_ASSET.match(asset.key.to_user_string()) if len(asset.keys) == 1 else None
        if not m:
            continue
        round_ = int(m.group(2) or m.group(3) or 0)
        make = make_episodes_checks if m.group(1).startswith("duel_episodes") else make_environments_checks
        checks.append(make(asset, round_))
    return checks


ALL_CHECKS: list = [model_registry_checks, *_round_checks(), pair_lift_checks, training_set_checks,
                    training_export_checks, author_value_checks]
