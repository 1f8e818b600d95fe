"""Where the warehouse lives, its table contract and writes, atomic `latest` switches.

Pure Python: nothing here imports Dagster or the simulated models (docs/ARCHITECTURE.md)."""
