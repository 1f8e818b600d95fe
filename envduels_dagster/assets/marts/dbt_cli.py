"""``envduels-dbt``: the dbt CLI, with ``--version`` answered offline.

Why: ``DbtCliResource`` runs ``<dbt_executable> --version`` before every invocation, and
dbt-core's ``--version`` asks pypi.org for the latest release (1 s timeout), which is a
network call in every mart run. This executable is dbt itself for every other command
(``dbt.cli.main.cli``, the same entry point as the ``dbt`` script); its version line comes
from the installed package metadata. Configured through ``DbtCliResource(dbt_executable=...)``,
a public setting: no dagster-dbt internals are touched.
"""

import shutil
import sys
from pathlib import Path


def offline_dbt_executable() -> str:
    """``envduels-dbt`` next to this interpreter, else on PATH, else the plain ``dbt`` (which asks pypi)."""
    local = Path(sys.executable).with_name("envduels-dbt")
    return str(local) if local.exists() else (shutil.which("envduels-dbt") or shutil.which("dbt") or "dbt")


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        from importlib.metadata import version

        print(f"Core:\n  - installed: {version('dbt-core')}\n\nPlugins:\n  - duckdb: {version('dbt-duckdb')}")
        return
    from dbt.cli.main import cli

    cli()


if __name__ == "__main__":
    main()
