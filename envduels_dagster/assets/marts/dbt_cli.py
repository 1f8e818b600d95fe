"""``envduels-dbt``: the dbt CLI, with ``--version`` answered offline.

Why: ``DbtCliResource`` runs ``<dbt_executable> --version`` before every invocation, and
dbt-core's ``--version`` asks pypi.org for the latest release (1 s timeout), which is a
network call in every mart run. This executable is dbt itself for every other command
(``dbt.cli.main.cli``, the same entry point as the ``dbt`` script); its version line comes
from the installed package metadata. Configured through ``DbtCliResource(dbt_executable=...)``,
a public setting: no dagster-dbt internals are touched.

It also dies with the process that started it (issue 33): a killed ``envduels demo`` (SIGTERM, SIGKILL)
left its dbt build writing the warehouse. dagster-dbt starts dbt with a plain ``Popen`` (no
``preexec_fn`` to set), so dbt asks the kernel itself (``PR_SET_PDEATHSIG``) for a SIGKILL when its
parent ends, given the parent's pid in :data:`PARENT_VAR` (set by the ``dbt_marts`` asset). A kill
mid-build leaves the warehouse as a kill of the whole process does: DuckDB rolls the open transaction back.
"""

import os
import shutil
import signal
import sys
from pathlib import Path

PARENT_VAR = "ENVDUELS_DBT_PARENT_PID"
PR_SET_PDEATHSIG = 1


def offline_dbt_executable() -> str:
    """``envduels-dbt`` next to this interpreter, else on PATH, else the plain ``dbt`` (which asks pypi)."""
    local = Path(sys.executable).with_name("envduels-dbt")
    return str(local) if local.exists() else (shutil.which("envduels-dbt") or shutil.which("dbt") or "dbt")


def die_with_parent() -> None:
    """SIGKILL this process when the process named by :data:`PARENT_VAR` ends (Linux); exit at once if it
    already has (then this process was re-parented before it could ask). No variable: nothing is asked."""
    from envduels_dagster.settings.variables import text_value  # the one table (settings/variables.py)

    parent = text_value(PARENT_VAR) or ""
    if not parent.isdigit() or not sys.platform.startswith("linux"):
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(parent):
        print(f"envduels-dbt: the process that started it (pid {parent}) is gone; not building", file=sys.stderr)
        raise SystemExit(1)


def main() -> None:
    die_with_parent()
    if sys.argv[1:] == ["--version"]:
        from importlib.metadata import version

        print(f"Core:\n  - installed: {version('dbt-core')}\n\nPlugins:\n  - duckdb: {version('dbt-duckdb')}")
        return
    from dbt.cli.main import cli

    cli()


if __name__ == "__main__":
    main()
