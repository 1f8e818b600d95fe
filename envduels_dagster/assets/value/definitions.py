"""The value area: ``author_value`` [learner], which author to pay to write a learner's environments.

Why an area of its own: it answers a purchasing question (learnable environments per
environment written, per dollar, per call) on top of duels and authoring costs; it reads
what training reads but publishes nothing, and its budget is its own resource
(``value_settings``, ``resources/value_settings.py``).
"""

import dagster as dg

from envduels_dagster.assets.value.assets import author_value
from envduels_dagster.assets.value.checks import author_value_checks


def defs() -> dg.Definitions:
    return dg.Definitions(assets=[author_value], asset_checks=[author_value_checks])
