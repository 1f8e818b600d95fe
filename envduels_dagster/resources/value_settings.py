"""What the user is shopping for: the budget of the author-value projection, and its minimum sample.

Why a resource of its own: the budget is a purchasing decision, not a duel parameter; it
changes the projection (``author_value_mix``) without touching how duels are played.
"""

import dagster as dg


class AuthorValueSettings(dg.ConfigurableResource):
    # The projection's budget: what the user would spend on authoring for the learner (not a spending cap: the
    # caps are the registry's budget_usd and ENVDUELS_BUDGET_USD, which stop calls). Named apart from them (issue 47).
    projection_budget_usd: float = 100.0  # when every ranked author has a price
    projection_budget_calls: float = 10_000  # in authoring calls, when some author has no price
    max_share: float = 1.0  # at most this share of the budget per author (1.0: all on the best one)
    # below this many sampled environments an author is "insufficient data": not ranked, no intervals (its
    # intervals covered 0.92-0.93 at 3 and 0.94-0.95 at 4: core.value.author_value.MIN_ENVS, docs/STATISTICS.md)
    min_envs: int = 4
    n_boot: int = 2000
