"""``envduels_dagster.instance_storage``: the path an existing dagster.yaml names (now ``envduels_dagster.instance.storage``)."""

from envduels_dagster.instance.storage import PooledSqliteStorage

__all__ = ["PooledSqliteStorage"]
