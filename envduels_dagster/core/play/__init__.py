"""One episode, the adaptive sampler, one pair.

Pure Python: nothing here imports Dagster or the simulated models (docs/ARCHITECTURE.md)."""
