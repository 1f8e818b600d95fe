"""The Dagster layer, one folder per area of the pipeline (DESIGN §5).

Why areas: a newcomer looking for "the sensor of the registry" or "the checks of the
training set" finds it at the first guess, because every area has the same file names:
``assets.py``, ``checks.py``, ``partitions.py``, ``jobs.py``, ``sensors.py``,
``schedules.py`` and a ``definitions.py`` whose ``defs()`` returns that area's
``Definitions``. ``envduels_dagster/definitions.py`` merges them.

Areas: registry -> authoring -> duels -> rounds -> marts -> training -> studies.
Nothing in this package does work at import time: assets only wire resources to one
core function (``envduels_dagster/core``); paths and counts are resolved when a run
starts or when ``defs()`` is called.
"""
