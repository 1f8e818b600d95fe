"""Asyncio helpers shared by the packages that run model calls together (play, authoring)."""
