"""Author value and its chart.

Pure Python: nothing here imports Dagster or the simulated models (docs/ARCHITECTURE.md)."""
