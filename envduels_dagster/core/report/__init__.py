"""The one-page experiment report and its SVG figures.

Pure Python: nothing here imports Dagster or the simulated models (docs/ARCHITECTURE.md)."""
