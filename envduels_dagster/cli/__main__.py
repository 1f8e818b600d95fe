"""``python -m envduels_dagster.cli``: the same command line as the ``envduels`` entry point."""

import sys

from envduels_dagster.cli import main

if __name__ == "__main__":
    sys.exit(main())
