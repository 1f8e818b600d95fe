"""Tests mirror the source: a test file sits in the folder of the package it uses most, and imports no other test file.

The rule, precisely (``placement``):

* Which files: every ``tests/**/test_*.py`` except ``tests/flows/`` (end-to-end: processes, daemons, browsers,
  whatever they import), the files directly in ``tests/`` (this file and test_layering: the repository as a whole)
  and the folders in ``NOT_THE_PACKAGE`` (they mirror a repository folder that is not Python, e.g. ``deploy/``).
* An area of ``envduels_dagster/`` is the package folder a module lives in, cut at two levels: ``core/models``,
  ``assets/marts``, ``sim``, ``cli``, ``core`` (the protocol, directly in ``core/``), ``assets`` (``assets/shared.py``),
  ``""`` (a root module; ``ROOT_MODULE_AREA`` maps the ones that belong to an area). Its test folder is
  ``tests/<area>/``.
* Every name a test file binds from the package counts for the area it comes from: ``from envduels_dagster.core.stats
  import lift, pair_lift`` binds two names of ``core/stats``; ``from envduels_dagster.core import stats`` binds the
  package ``core/stats``; ``import envduels_dagster.x.y as z`` binds ``z``. Imports anywhere count (module level,
  inside functions and fixtures). A name weighs the number of times the file reads it, at least 1, so a setup import
  used once weighs less than the module the file exercises in every test.
* The protocol (``core/protocol.py``) is every layer's vocabulary: it counts only when the file imports nothing else.
* The file belongs in the folder of the area with the highest weight; on a tie, in the folder of any tied area.
  ``EXCEPTIONS`` lists the files that sit elsewhere on purpose, each with its reason.

And: a test file imports helpers from ``tests.helpers`` (or ``tests.code_location``), never from another test file,
so moving a test never breaks another one.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers.paths import REPO, TESTS

PACKAGE = "envduels_dagster"
# Folders outside the rule, with the reason.
NOT_RULED = {
    "flows": "end-to-end tests drive processes, daemons and browsers; they test flows, not one package",
    "helpers": "shared helpers, not tests",
    "fixtures": "data and code locations the tests load",
    "reply_corpus": "recorded model replies (data)",
}
NOT_THE_PACKAGE = {"deploy": "tests/deploy/ checks the repository's deploy/ folder (Dockerfiles, compose, k8s)"}
# Root modules that belong to an area's tests: module -> area.
ROOT_MODULE_AREA = {
    "definitions": "assets",  # definitions.py only assembles the asset areas (AREAS): its tests are the Dagster layer's
}
# Test files that sit elsewhere than the rule says, on purpose: path under tests/ -> reason.
EXCEPTIONS = {
    "sim/test_simulated_models.py": "tests the simulated models by playing them through core's gateway and episode "
                                    "player: core names outnumber sim's, but sim/ is what it checks",
    "core/rankings/test_controls.py": "the rankings' control runs: the simulated profiles are its data (read often), "
                                      "the rankings what it checks",
    "core/models/test_providers.py": "the model providers over HTTP (serve-sim, litellm, the fast client); the asset "
                                     "materializations are only how a pair reaches them",
    "assets/registry/test_batched_runs.py": "the sensor's run requests (assets/registry/requests.py) executed as the "
                                            "daemon would; core/requests' batches are what it compares them with",
    "assets/rounds/test_coevolution.py": "co-evolution rounds materialized in Dagster; stats, rankings and registry "
                                         "names only set up and read its results",
    "assets/test_pipeline.py": "the whole asset graph in one ephemeral instance (every area at once), not one area",
    "assets/test_code_location.py": "the code location as a whole (definitions in a fresh interpreter, the snapshot); "
                                    "its one package import is incidental",
    "cli/test_solver_ranking_shared.py": "the demo's leaderboard (cli/demo.leaderboard) is its subject; the "
                                         "warehouse functions only build its input",
}
# Test modules other test files may import (shared, not tests).
SHARED = ("tests.helpers", "tests.code_location", "tests.conftest")


def area_of(dotted: str, package: Path) -> str | None:
    """The area (package folder cut at two levels) of ``envduels_dagster.a.b.c``; None outside the package."""
    parts = dotted.split(".")
    if parts[0] != PACKAGE:
        return None
    parts = parts[1:]
    while parts:
        here = package.joinpath(*parts)
        if (here / "__init__.py").exists():  # a package: its own folder
            folder = parts
            break
        if here.with_suffix(".py").exists():  # a module: the folder it sits in
            folder = parts[:-1]
            if not folder:
                return ROOT_MODULE_AREA.get(parts[0], "")
            break
        parts = parts[:-1]  # an attribute (a class, a function): look at its module
    else:
        return ""
    return "/".join(folder[:2])


def weights(path: Path, package: Path) -> Counter[str]:
    """Area -> the weight of the names this file binds from it (see the module docstring)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                area = area_of(alias.name, package)
                if area is not None:
                    bound[alias.asname or alias.name.split(".")[0]] = area
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                area = area_of(f"{node.module}.{alias.name}", package)
                if area is not None:
                    bound[alias.asname or alias.name] = area
    reads = Counter(node.id for node in ast.walk(tree) if isinstance(node, ast.Name))
    out: Counter[str] = Counter()
    for name, area in bound.items():
        out[area] += max(1, reads[name])
    if set(out) - {"core"}:
        out.pop("core", None)  # the protocol counts only alone
    return out


def ruled_files(tests: Path) -> list[Path]:
    skip = set(NOT_RULED) | set(NOT_THE_PACKAGE)
    return sorted(p for p in tests.rglob("test_*.py")
                  if p.parent != tests and p.relative_to(tests).parts[0] not in skip)


def best_folders(path: Path, package: Path) -> tuple[list[str], Counter[str]]:
    """The areas a test file may sit in (the heaviest; all of them on a tie), and every area's weight."""
    scores = weights(path, package)
    top = max(scores.values(), default=0)
    return sorted(area for area, score in scores.items() if score == top), scores


def misplaced(tests: Path, package: Path, exceptions: dict[str, str]) -> list[str]:
    """One line per test file outside the folder of the area it uses most (or using nothing of the package)."""
    out = []
    for path in ruled_files(tests):
        rel = path.relative_to(tests).as_posix()
        if rel in exceptions:
            continue
        best, scores = best_folders(path, package)
        if not scores:
            out.append(f"tests/{rel} imports nothing from {PACKAGE}/: move it to tests/flows/ if it drives a "
                       "process, or list it in EXCEPTIONS with the reason")
        elif path.parent.relative_to(tests).as_posix() not in best:
            folders = " or ".join(f"tests/{area}/" if area else "tests/" for area in best)
            out.append(f"tests/{rel} belongs in {folders} (uses {dict(scores.most_common(4))}): git mv it there, "
                       "or list it in EXCEPTIONS with the reason")
    return out


def test_every_test_file_sits_in_the_folder_of_the_package_it_uses_most():
    bad = misplaced(TESTS, REPO / PACKAGE, EXCEPTIONS)
    assert bad == [], "\n".join(bad)


def test_every_exception_names_a_test_file_the_rule_would_move_and_says_why():
    ruled = {p.relative_to(TESTS).as_posix() for p in ruled_files(TESTS)}
    for rel, reason in EXCEPTIONS.items():
        assert rel in ruled, f"EXCEPTIONS names tests/{rel}, which is not a ruled test file: remove the entry"
        assert len(reason) > 20, f"EXCEPTIONS[{rel!r}]: say why it sits where it does"
        best, _ = best_folders(TESTS / rel, REPO / PACKAGE)
        assert Path(rel).parent.as_posix() not in best, \
            f"tests/{rel} already sits where the rule puts it: remove it from EXCEPTIONS"


def test_every_test_folder_is_a_package():
    """Package-style imports (``tests.helpers...``) and equal basenames in two folders need ``__init__.py``."""
    missing = sorted(str(p.parent.relative_to(REPO)) for p in TESTS.rglob("test_*.py")
                     if "reply_corpus" not in p.parts and not (p.parent / "__init__.py").exists())
    assert missing == [], f"add an empty __init__.py to {sorted(set(missing))}"


def imported_test_modules(path: Path) -> list[str]:
    """The ``tests.*`` modules a file imports that are not shared helpers (also in subprocess scripts it writes)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module]
    for node in ast.walk(tree):  # a script run in a subprocess imports by a dotted name in a string
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "from tests." in node.value:
            names += [line.split()[1] for line in node.value.splitlines() if line.strip().startswith("from tests.")]
    own = ".".join(path.relative_to(REPO).with_suffix("").parts) if path.is_relative_to(REPO) else None
    return sorted({n for n in names if n.split(".")[0] == "tests" and not n.startswith(SHARED) and n != own})


def test_no_test_file_imports_another_test_file():
    bad = {p.relative_to(TESTS).as_posix(): mods for p in TESTS.rglob("*.py")
           if "reply_corpus" not in p.parts and p != Path(__file__)  # this file's probes name test modules
           and (mods := imported_test_modules(p))}
    assert bad == {}, f"{bad}: move what both use into tests/helpers/ and import it from there"


# The rule itself, on a temporary tree.

def _tree(tmp_path: Path, files: dict[str, str]) -> tuple[Path, Path]:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path / "tests", tmp_path / PACKAGE


PACKAGE_FILES = {
    f"{PACKAGE}/__init__.py": "", f"{PACKAGE}/definitions.py": "", f"{PACKAGE}/api.py": "",
    f"{PACKAGE}/core/__init__.py": "", f"{PACKAGE}/core/protocol.py": "",
    f"{PACKAGE}/core/stats/__init__.py": "", f"{PACKAGE}/core/stats/lift.py": "",
    f"{PACKAGE}/core/models/__init__.py": "", f"{PACKAGE}/core/models/registry.py": "",
    f"{PACKAGE}/assets/__init__.py": "", f"{PACKAGE}/assets/marts/__init__.py": "",
    f"{PACKAGE}/assets/marts/assets.py": "",
}
USES_STATS = ("from envduels_dagster.core.stats.lift import pair_lift\n"
              "from envduels_dagster.core.models.registry import load_registry\n"
              "def test_x():\n    load_registry()\n    pair_lift(); pair_lift()\n")


def test_the_rule_moves_a_file_to_the_package_it_uses_most(tmp_path):
    tests, package = _tree(tmp_path, PACKAGE_FILES | {"tests/core/models/test_lift.py": USES_STATS,
                                                       "tests/core/stats/test_ok.py": USES_STATS})
    bad = misplaced(tests, package, {})
    assert len(bad) == 1 and bad[0].startswith("tests/core/models/test_lift.py belongs in tests/core/stats/"), bad
    assert "'core/stats': 2, 'core/models': 1" in bad[0] and "EXCEPTIONS" in bad[0]
    assert misplaced(tests, package, {"core/models/test_lift.py": "a reason"}) == []  # an exception is honoured


def test_reads_weigh_more_than_a_setup_import_and_a_tie_allows_either_folder(tmp_path):
    text = ("from envduels_dagster.core.stats.lift import a, b, c\n"  # three names, each read once ...
            "from envduels_dagster.core.models import registry\n"  # ... against one name read three times
            "def test_x():\n    a(); b(); c(); registry.x(); registry.y(); registry.z()\n")
    tests, package = _tree(tmp_path, PACKAGE_FILES | {"tests/core/models/test_tie.py": text,
                                                       "tests/core/stats/test_tie2.py": text})
    assert misplaced(tests, package, {}) == []
    assert weights(tests / "core/models/test_tie.py", package) == {"core/stats": 3, "core/models": 3}


def test_the_protocol_counts_only_alone_and_definitions_belong_to_the_assets(tmp_path):
    protocol_heavy = ("from envduels_dagster.core.protocol import Spec\nfrom envduels_dagster.core.stats import lift\n"
                      "def test_x():\n    Spec(); Spec(); Spec(); lift.f()\n")
    tests, package = _tree(tmp_path, PACKAGE_FILES | {
        "tests/core/stats/test_a.py": protocol_heavy,
        "tests/core/test_protocol.py": "from envduels_dagster.core.protocol import Spec\n",
        "tests/assets/test_defs.py": "from envduels_dagster.definitions import defs\nfrom envduels_dagster.assets."
                                     "marts.assets import m\ndef test_x():\n    defs(); defs()\n",
        "tests/core/test_api.py": "from envduels_dagster.api import read\n",
        "tests/flows/test_anything.py": "from envduels_dagster.api import read\n",
        "tests/deploy/test_files.py": "import yaml\n",
    })
    assert misplaced(tests, package, {}) == [
        "tests/core/test_api.py belongs in tests/ (uses {'': 1}): git mv it there, or list it in EXCEPTIONS with the "
        "reason"]


def test_a_ruled_file_that_imports_nothing_of_the_package_is_named(tmp_path):
    tests, package = _tree(tmp_path, PACKAGE_FILES | {"tests/core/stats/test_none.py": "import json\n"})
    assert misplaced(tests, package, {}) == [
        "tests/core/stats/test_none.py imports nothing from envduels_dagster/: move it to tests/flows/ if it drives a "
        "process, or list it in EXCEPTIONS with the reason"]


def test_an_import_of_another_test_file_is_seen_also_inside_a_subprocess_script(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text("from tests.helpers.paths import REPO\nfrom tests.core.stats.test_stats import episodes\n"
                     "SCRIPT = '''\nimport sys\nfrom tests.core.test_export import item\n'''\n"
                     "def f():\n    import tests.flows.test_cli\n")
    assert imported_test_modules(probe) == ["tests.core.stats.test_stats", "tests.core.test_export",
                                            "tests.flows.test_cli"]


@pytest.mark.parametrize("dotted, area", [
    ("envduels_dagster.core.stats.lift.pair_lift", "core/stats"), ("envduels_dagster.core.stats", "core/stats"),
    ("envduels_dagster.core.protocol.Spec", "core"), ("envduels_dagster.definitions.defs", "assets"),
    ("envduels_dagster.api", ""), ("envduels_dagster", ""), ("dagster", None)])
def test_the_area_of_a_dotted_name(tmp_path, dotted, area):
    _, package = _tree(tmp_path, PACKAGE_FILES)
    assert area_of(dotted, package) == area
