"""The Dagster instance's plugins that ``dagster.yaml`` names (run coordinator, run launcher, event storage), and
the preparation of the instance home (``DAGSTER_HOME``). Dagster loads these by their dotted paths; nothing here
runs at import time."""
