"""Rankings and their intervals, tournament, population bounds, convergence, progress, UI text.

Pure Python: nothing here imports Dagster or the simulated models (docs/ARCHITECTURE.md)."""
