"""The lift -> learning study.

Pure Python: nothing here imports Dagster or the simulated models (docs/ARCHITECTURE.md)."""
