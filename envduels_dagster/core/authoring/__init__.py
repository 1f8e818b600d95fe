"""Prompts, reply parsing, validation, hardening, co-evolution digests, imports.

Pure Python: nothing here imports Dagster or the simulated models (docs/ARCHITECTURE.md)."""
