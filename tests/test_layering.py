"""The layering holds: core/ never imports sim/ or Dagster, and no module grows past 400 lines.

A static walk of every import statement (module-level and inside functions), so a lazy
import cannot hide a dependency. The stdlib-only sandbox worker is the one module allowed
to be long (it must be a single self-contained file). Modules that colleagues are splitting
on their branches right now are marked xfail(strict=False) with the branch's name; the lead
removes the marks when those branches merge.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "envduels_dagster"
MAX_LINES = 400
LONG_ALLOWED = {"core/sandbox/worker.py"}
# Being split or decoupled on other branches (issue 14); remove the mark when the branch merges.
TOO_LONG_IN_PROGRESS: dict[str, str] = {}
IMPORTS_SIM_IN_PROGRESS: dict[str, str] = {}


def modules() -> list[str]:
    return sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py"))


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level:
            out.add("." * node.level + (node.module or ""))
    return out


def forbidden_in_core(name: str) -> bool:
    top = name.split(".")[0]
    return top == "dagster" or top.startswith("dagster_") or name.startswith("envduels_dagster.sim") \
        or name.startswith("..sim")


def marked(rel: str, in_progress: dict[str, str]):
    return pytest.param(rel, marks=pytest.mark.xfail(strict=False, reason=in_progress[rel])) \
        if rel in in_progress else rel


def test_the_walk_sees_function_level_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from envduels_dagster.sim.model import X\n    import dagster_dbt\n")
    assert {"envduels_dagster.sim.model", "dagster_dbt"} <= imported_modules(probe)
    assert all(forbidden_in_core(m) for m in imported_modules(probe))


@pytest.mark.parametrize("rel", [marked(m, IMPORTS_SIM_IN_PROGRESS) for m in modules() if m.startswith("core/")])
def test_core_imports_neither_sim_nor_dagster(rel):
    bad = sorted(m for m in imported_modules(PACKAGE / rel) if forbidden_in_core(m))
    assert bad == [], f"{rel} imports {bad}: core/ must not depend on sim/ or Dagster"


@pytest.mark.parametrize("rel", [marked(m, TOO_LONG_IN_PROGRESS) for m in modules() if m not in LONG_ALLOWED])
def test_no_module_exceeds_400_lines(rel):
    lines = len((PACKAGE / rel).read_text().splitlines())
    assert lines <= MAX_LINES, f"{rel} has {lines} lines (limit {MAX_LINES}): split it"


def test_the_dagster_layer_is_grouped_by_area():
    areas = {"registry", "authoring", "duels", "rounds", "marts", "training", "value", "studies", "report"}
    for area in areas:
        folder = PACKAGE / "assets" / area
        assert (folder / "definitions.py").exists() and (folder / "assets.py").exists(), area
    from envduels_dagster.definitions import AREAS

    assert set(AREAS) == areas
