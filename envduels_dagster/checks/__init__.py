"""Data checks (great-expectations suites run inside Dagster asset checks).

``ALL_CHECKS`` is what ``definitions.py`` loads; add new check modules here.
"""

ALL_CHECKS: list = []
