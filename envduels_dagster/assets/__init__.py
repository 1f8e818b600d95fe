"""Software-defined assets of the duel pipeline (DESIGN §5)."""
