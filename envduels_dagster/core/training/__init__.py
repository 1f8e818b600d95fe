"""The training set, its export, contract, format, published snapshots.

Pure Python: nothing here imports Dagster or the simulated models (docs/ARCHITECTURE.md)."""
