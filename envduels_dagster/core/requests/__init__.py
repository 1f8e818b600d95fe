"""What the sensor schedules: stages, staleness, batching, the roster of roles, the plan and its price.

Pure Python: nothing here imports Dagster or the simulated models (docs/ARCHITECTURE.md)."""
