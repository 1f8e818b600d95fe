"""Where things are, for tests at any depth of the tests/ tree (they mirror the source's folders)."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]  # tests/
REPO = TESTS.parent  # the checkout
REGISTRIES = TESTS / "registries"
