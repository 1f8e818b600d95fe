"""Pure-Python duel engine: protocol, sandbox, validation, authoring, play, gateway, cache.

Nothing in this package imports Dagster, so it can be used from the CLI, from
notebooks and from any orchestrator.
"""
