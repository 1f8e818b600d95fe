"""The rules behind the result assets' checks.

Pure Python: nothing here imports Dagster or the simulated models (docs/ARCHITECTURE.md)."""
