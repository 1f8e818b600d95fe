"""The layering holds: core/ never imports sim/ or Dagster, assets/ never imports sim/, no import circle
anywhere in the package, no import from a lower package of core/ up to a higher one (the levels of
docs/ARCHITECTURE.md "Layout"), and no module grows past 400 lines.

A static walk of every import statement (module-level, inside functions and under TYPE_CHECKING), so a
lazy import cannot hide a dependency. A module named as data (``"module:attr"`` resolved at run time, as
the provider and launcher registries do) is not an import: that is how a lower module names a higher one. The stdlib-only sandbox worker is the one module allowed
to be long (it must be a single self-contained file). Modules that colleagues are splitting
on their branches right now are marked xfail(strict=False) with the branch's name; the lead
removes the marks when those branches merge.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "envduels_dagster"
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
README = ROOT / "README.md"
# Outside sim/, only the CLI's `serve-sim` command may import the simulated models (it serves them).
IMPORTS_SIM_ALLOWED = {"cli/__init__.py"}
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


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (``from pkg import submodule`` counts as the submodule)."""
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        is_pkg = path.name == "__init__.py"
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
                targets |= {f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base for a in node.names}
        out = set()
        for target in targets:
            while target and target not in paths:
                target = target.rpartition(".")[0]
            if target and target != name and target != "envduels_dagster":
                out.add(target)
        graph[name] = out
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def planned_layout() -> tuple[dict[str, int], dict[str, str]]:
    """(package -> level, flat core module -> planned package) from docs/ARCHITECTURE.md "Layout"."""
    text = ARCHITECTURE.read_text()
    section = text[text.index("## Layout"):]
    levels = {m[1]: int(m[2]) for m in re.finditer(r"^\| `core/(\w+)(?:/|\.py)` \| (\d+) \|", section, re.M)}
    planned = {m[1]: m[2] for m in re.finditer(r"^\| `core/(\w+)\.py` \| `core/(\w+)/\w+\.py` \|", section, re.M)}
    return levels, planned


def core_package(module: str, planned: dict[str, str]) -> str | None:
    """The planned package of a core module (its directory once moved), None outside core."""
    parts = module.split(".")
    if parts[:2] != ["envduels_dagster", "core"] or len(parts) < 3:
        return None
    if len(parts) == 3 and parts[2] not in planned:  # a flat module: protocol, or one the table must list
        return parts[2]
    return planned[parts[2]] if len(parts) == 3 else parts[2]


def test_the_circle_finder_sees_a_circle_through_three_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_anywhere_in_the_package():
    found = circles(package_graph())
    assert found == [], (f"import circles {found}: break each by moving what both sides share into a lower module "
                         "(see core/models/cache_batching.py, core/models/litellm_call.py) or by naming the higher module "
                         "as data (core/sandbox/launchers.BUILTIN)")


def test_assets_never_import_sim():
    bad = {rel: sorted(m for m in imported_modules(PACKAGE / rel) if m.startswith("envduels_dagster.sim"))
           for rel in modules() if not rel.startswith("sim/") and rel not in IMPORTS_SIM_ALLOWED}
    bad = {rel: mods for rel, mods in bad.items() if mods}
    assert bad == {}, f"{bad}: only sim/ (and the serve-sim command) may import sim/; ask the provider for a " \
                      "capability instead (core/models/capabilities.py)"


def test_every_flat_core_module_has_a_planned_package_with_a_level():
    levels, planned = planned_layout()
    assert {"protocol", "models", "stats", "sandbox"} <= set(levels)
    flat = sorted(p.stem for p in (PACKAGE / "core").glob("*.py") if p.stem not in {"__init__", "protocol"})
    missing = [m for m in flat if m not in planned]
    assert missing == [], f"core/{missing}: add a row to docs/ARCHITECTURE.md \"Planned layout\" (its future package)"
    unknown = sorted({p for p in planned.values() if p not in levels})
    assert unknown == [], f"planned packages {unknown} have no level in docs/ARCHITECTURE.md \"Planned layout\""
    for pkg in (p.name for p in (PACKAGE / "core").iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        assert pkg in levels, f"core/{pkg}/ has no level in docs/ARCHITECTURE.md \"Planned layout\""


def test_no_core_import_runs_up_a_level_or_across_packages_of_one_level():
    levels, planned = planned_layout()
    bad = []
    for module, targets in package_graph().items():
        here = core_package(module, planned)
        if here is None:
            continue
        for target in targets:
            there = core_package(target, planned)
            if there is None or there == here:
                continue
            if there in levels and here in levels and levels[there] >= levels[here]:
                bad.append(f"{module} ({here}, level {levels[here]}) -> {target} ({there}, level {levels[there]})")
    assert bad == [], "imports against the planned layers (docs/ARCHITECTURE.md):\n" + "\n".join(sorted(bad))


def test_core_holds_packages_and_the_protocol_only():
    flat = sorted(p.name for p in (PACKAGE / "core").glob("*.py") if p.name not in {"__init__.py", "protocol.py"})
    assert flat == [], f"flat modules left in core/: {flat}"


# The package root (docs/ARCHITECTURE.md "Layers: the package root", issue 47).
ROOT_ROW = re.compile(r"^\| `([\w.]+/?)` \| ([^|]+) \| ([^|]*) \| .* \|$", re.M)
MAX_ROOT_MODULES = 6


def root_table() -> dict[str, set[str]]:
    """entry (``core``, ``api``, ``__init__``) -> the entries it may import, from the root table."""
    text = ARCHITECTURE.read_text()
    section = text[text.index("## Layers: the package root"):text.index("## Where each concept lives")]
    table = {}
    for m in ROOT_ROW.finditer(section):
        entry = m[1].removesuffix("/").removesuffix(".py")
        assert entry not in table, f"docs/ARCHITECTURE.md: `{m[1]}` has two rows"
        table[entry] = set(re.findall(r"`(\w+)`", m[3]))
    return table


def root_entries() -> dict[str, str]:
    """What the package root holds: name -> "package" or "module" (``__pycache__`` and data folders aside)."""
    out = {p.stem: "module" for p in PACKAGE.glob("*.py")}
    out |= {p.name: "package" for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    return out


def test_the_root_table_matches_the_tree():
    table, entries = root_table(), root_entries()
    missing = sorted(set(entries) - set(table))
    assert missing == [], (f"envduels_dagster/{missing}: add a row to docs/ARCHITECTURE.md \"Layers: the package "
                           "root\" (its layer, what it may import, what it holds)")
    gone = sorted(set(table) - set(entries))
    assert gone == [], f"docs/ARCHITECTURE.md \"Layers: the package root\" names {gone}, which do not exist"
    unknown = sorted({t for allowed in table.values() for t in allowed if t not in entries})
    assert unknown == [], f"docs/ARCHITECTURE.md: \"may import\" names {unknown}, which are not root entries"
    loose = [p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"
             and not (p / "__init__.py").exists() and any(p.rglob("*.py"))]
    assert loose == [], f"envduels_dagster/{loose}: Python files in a folder that is not a package"


def test_the_root_is_a_handful_of_rooms():
    modules = sorted(name for name, kind in root_entries().items() if kind == "module" and name != "__init__")
    assert len(modules) <= MAX_ROOT_MODULES, (
        f"envduels_dagster/ holds {len(modules)} modules besides its packages ({', '.join(modules)}); at most "
        f"{MAX_ROOT_MODULES}: put a new one in the package of its kind (cli/, instance/, settings/, ...)")


def root_entry(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__" if parts == ["envduels_dagster"] else None


def root_violations(graph: dict[str, set[str]], table: dict[str, set[str]]) -> list[str]:
    return sorted(f"{module} ({root_entry(module)}) -> {target}"
                  for module, targets in graph.items() for target in targets
                  if root_entry(target) not in table.get(root_entry(module) or "", set()) | {root_entry(module)})


def test_root_entries_import_only_what_their_row_allows():
    bad = root_violations(package_graph(), root_table())
    assert bad == [], ("imports against docs/ARCHITECTURE.md \"Layers: the package root\" (add the arrow there if "
                       "it is meant, and check it points down the table):\n" + "\n".join(bad))


def test_the_root_rule_sees_an_arrow_up_and_allows_one_down():
    graph = {"envduels_dagster.core.protocol": {"envduels_dagster.cli.errors"},
             "envduels_dagster.cli.errors": {"envduels_dagster.core.protocol", "envduels_dagster.cli.options"}}
    assert root_violations(graph, root_table()) == ["envduels_dagster.core.protocol (core) -> envduels_dagster.cli.errors"]


def test_the_core_levels_name_only_packages_that_exist():
    levels, _ = planned_layout()
    packages = {p.name for p in (PACKAGE / "core").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    gone = sorted(set(levels) - packages - {"protocol"})
    assert gone == [], f"docs/ARCHITECTURE.md \"Layout\" gives a level to core/{gone}, which do not exist"
    assert (PACKAGE / "core" / "protocol.py").exists()


DOC_PATH = re.compile(r"`((?:[\w-]+/)+[\w-]+(?:\.py|/|\.\w+)?)`")


def named_paths(text: str) -> list[str]:
    return [m for m in DOC_PATH.findall(text) if "<" not in m]


def resolves(name: str) -> bool:
    """A path (``core/play/episode.py``, ``tests/conftest.py``, ``cli/``) or a module's attribute
    (``core/play/episode.play_episode``) relative to the package, core/ or the checkout, that exists."""
    bases = (PACKAGE, PACKAGE / "core", ROOT)
    if any((base / name.rstrip("/")).exists() for base in bases):
        return True
    module, _, attr = name.rpartition(".")
    for base in bases:
        path = base / f"{module}.py"
        if attr and path.exists() and re.search(rf"^(?:async def |def |class |)\s*{re.escape(attr)}\b", path.read_text(),
                                                re.M):
            return True
    return False


def test_every_path_architecture_names_exists():
    text = ARCHITECTURE.read_text()
    current = text[:text.index("| module today | planned path |")]  # the table below it is the history of a move
    gone = sorted({name for name in named_paths(current) if not resolves(name)})
    assert gone == [], f"docs/ARCHITECTURE.md names {gone}, which do not exist (moved? renamed?)"


def test_a_moved_path_is_seen_as_gone():
    assert resolves("core/play/episode.play_episode") and resolves("cli/") and resolves("tests/conftest.py")
    assert not resolves("core/play/episodes.play_episode") and not resolves("core/export_contract.py")
    assert not resolves("core/play/episode.no_such_function")


def test_every_path_the_readme_names_in_how_the_pieces_fit_exists():
    text = README.read_text()
    section = text[text.index("## How the pieces fit"):text.index("### Environments and the sandbox")]
    gone = sorted({name for name in named_paths(section) if not resolves(name)})
    assert gone == [], f"README.md \"How the pieces fit\" names {gone}, which do not exist"
    root = {f"{name}/" if kind == "package" else f"{name}.py" for name, kind in root_entries().items()} - {"__init__.py"}
    unnamed = sorted(entry for entry in root if f"`{entry}`" not in section and f"`envduels_dagster/{entry}" not in section)
    assert unnamed == [], f"README.md \"How the pieces fit\" does not say what {unnamed} hold"
