"""Where the project's own files are: the checkout, or the copy inside an installed wheel.

Why: in a checkout (and an editable install) ``dbt_project/``, ``models.yaml`` and ``dagster.yaml``
sit next to the package, where users edit them. A wheel (a container image, a Dagster code server)
has no checkout: setup.py copies them into ``envduels_dagster/_project/``. Callers ask for a name
and get whichever exists, the checkout first. Imports nothing; reads nothing until called.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[2]  # envduels_dagster/ (this file: core/storage/)
CHECKOUT = _PACKAGE.parent
PACKAGED = _PACKAGE / "_project"


def in_checkout() -> bool:
    return (CHECKOUT / "pyproject.toml").exists() and (CHECKOUT / "dbt_project" / "dbt_project.yml").exists()


def project_file(name: str) -> Path:
    """``name`` (e.g. ``"dbt_project"``, ``"models.yaml"``) from the checkout, else from the wheel's copy."""
    return (CHECKOUT if in_checkout() else PACKAGED) / name
