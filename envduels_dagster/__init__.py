"""EnvDuels on Dagster: models duel as authors and solvers of interactive environments.

Layout: ``core/`` and ``sim/`` are pure domain logic (no Dagster); ``assets/``,
``resources/`` and ``definitions.py`` wire that logic into Dagster.
"""

__version__ = "0.1.0"
