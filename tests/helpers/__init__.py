"""Helpers shared by the tests (imported as ``tests.helpers.<module>``; fixtures stay in conftest.py)."""
