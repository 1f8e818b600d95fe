"""The report area of the Dagster layer (see ``envduels_dagster/assets/__init__.py``)."""
