"""Every ``ENVDUELS_*`` variable is in one table (settings/variables.py), the README's "Configuration" table is
that table, and nothing outside settings/ reads a variable itself (issue 47: settings were read in six places,
``ENVDUELS_STORAGE``'s choices written twice)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from envduels_dagster.settings.variables import BY_NAME, SETTINGS, SettingsError, check_settings, value
from tests.helpers.paths import REPO

PACKAGE = REPO / "envduels_dagster"
NAME = re.compile(r"\bENVDUELS_[A-Z0-9][A-Z0-9_]*\b")
README_ROW = re.compile(r"^\| `(ENVDUELS_[A-Z0-9_]+)` \|([^|]*)\| (.+) \|$", re.M)
# No module outside settings/ reads a variable itself, with no exception (issue 47): the engine (core/) is given
# every value by its callers, and the project's own child processes (the dbt build, its executable) read their
# internal variables through value() too.

def names_in(text: str) -> set[str]:
    return set(NAME.findall(text))


def test_every_variable_the_package_names_is_in_the_table():
    files = [*PACKAGE.rglob("*.py"), REPO / "dagster.yaml", REPO / "dbt_project" / "profiles.yml",
             REPO / "deploy" / "dagster-postgres.yaml"]
    unknown = {f"{name} ({path.relative_to(REPO)})" for path in files for name in names_in(path.read_text())
               if name not in BY_NAME}
    assert unknown == set(), (f"{sorted(unknown)}: add a Setting row to envduels_dagster/settings/variables.py "
                              "(and a README Configuration row unless it is internal)")


def readme_rows() -> dict[str, str]:
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Configuration"):text.index("### Performance knobs")]
    rows = {}
    for m in README_ROW.finditer(section):
        assert m[1] not in rows, f"README.md Configuration: {m[1]} has two rows"
        rows[m[1]] = m[2].strip().strip("`")
    return rows


def test_the_readme_configuration_table_is_the_settings_table():
    rows = readme_rows()
    settings = {s.name: s for s in SETTINGS if not s.internal}
    missing = sorted(set(settings) - set(rows))
    assert missing == [], f"README.md Configuration has no row for {missing} (envduels_dagster/settings/variables.py)"
    stray = sorted(set(rows) - set(settings))
    assert stray == [], f"README.md Configuration names {stray}, which are not settings (variables.py)"
    wrong = {name: (rows[name], s.shown_default) for name, s in settings.items() if rows[name] != s.shown_default}
    assert wrong == {}, f"README default != the table's default: {wrong}"


def test_a_readme_row_without_a_variable_is_caught(tmp_path):
    rows = {**readme_rows(), "ENVDUELS_NO_SUCH": "1"}
    assert sorted(set(rows) - {s.name for s in SETTINGS if not s.internal}) == ["ENVDUELS_NO_SUCH"]
    assert names_in("x = os.environ.get('ENVDUELS_NEW_KNOB')") == {"ENVDUELS_NEW_KNOB"} and "ENVDUELS_NEW_KNOB" \
        not in BY_NAME


def _constants(tree: ast.Module) -> dict[str, str]:
    return {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
            and isinstance(n.value.value, str) for t in n.targets if isinstance(t, ast.Name)}


def _imported_constants(tree: ast.AST) -> dict[str, str]:
    """Names a module imports from the package that are text constants there (``from x import BUDGET_ENV``)."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("envduels_dagster"):
            source = REPO.joinpath(*node.module.split("."))
            source = source / "__init__.py" if source.is_dir() else source.with_suffix(".py")
            theirs = _constants(ast.parse(source.read_text())) if source.exists() else {}
            found.update({a.asname or a.name: theirs[a.name] for a in node.names if a.name in theirs})
    return found


def _is_environ(node: ast.AST, aliases: set[str]) -> bool:
    """``os.environ``, ``environ`` (from os), or a name bound to an expression that holds one
    (``env = os.environ if environ is None else environ``, ``env = dict(os.environ)``)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or \
        (isinstance(node, ast.Name) and node.id in aliases)


def env_reads(path: Path) -> set[str]:
    """The ENVDUELS_* names a module reads from the environment: ``os.environ.get(N)``, ``os.environ[N]``,
    ``os.getenv(N)``, ``N in os.environ``, also through a name bound to the environment, with ``N`` a literal,
    a module constant or a constant imported from the package; a name built at run time (``f"ENVDUELS_{x}"``)
    counts as ``ENVDUELS_*``. Setting one for a child process is not a read."""
    tree = ast.parse(path.read_text())
    consts = {**_imported_constants(tree), **_constants(tree)}
    from_os = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "os"
               for a in n.names}
    aliases = {"environ"} & from_os
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None and any(
                _is_environ(sub, aliases) for sub in ast.walk(node.value)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            aliases |= {t.id for t in targets if isinstance(t, ast.Name)}

    def name_of(node) -> str | None:
        if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            return "ENVDUELS_*" if str(node.values[0].value).startswith("ENVDUELS_") else None
        got = node.value if isinstance(node, ast.Constant) else consts.get(node.id) if isinstance(node, ast.Name) \
            else None
        return got if isinstance(got, str) and got.startswith("ENVDUELS_") else None

    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and (
                (isinstance(node.func, ast.Attribute) and (node.func.attr == "getenv" or (
                    node.func.attr in ("get", "pop", "setdefault") and _is_environ(node.func.value, aliases))))
                or (isinstance(node.func, ast.Name) and node.func.id == "getenv" and "getenv" in from_os)):
            found.add(name_of(node.args[0]))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value, aliases):
            found.add(name_of(node.slice))
        elif isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops) and \
                any(_is_environ(c, aliases) for c in node.comparators):
            found.add(name_of(node.left))
    return found - {None}


def test_the_reader_finder_sees_reads_and_not_writes(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import os\nVAR = 'ENVDUELS_B'\na = os.environ.get('ENVDUELS_A')\nb = os.environ[VAR]\n"
                     "c = os.getenv('ENVDUELS_C')\nos.environ['ENVDUELS_D'] = '1'\nd = os.environ.get('HOME')\n")
    assert env_reads(probe) == {"ENVDUELS_A", "ENVDUELS_B", "ENVDUELS_C"}


def test_the_reader_finder_sees_reads_through_aliases_imports_and_built_names(tmp_path):
    """The ways the engine used to read (``home_dir``: ``env = os.environ if environ is None else environ``, then
    ``env.get("ENVDUELS_HOME")``; ``budget_from_env``: a constant) and a few more are all caught."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os\nfrom os import environ, getenv\nfrom envduels_dagster.assets.marts.dbt_cli import PARENT_VAR\n"
        "def home(environ_=None):\n    env = os.environ if environ_ is None else environ_\n"
        "    return env.get('ENVDUELS_HOME')\n"
        "copy = dict(os.environ)\nx = copy['ENVDUELS_COPY']\ny = environ.get(PARENT_VAR)\nz = getenv('ENVDUELS_G')\n"
        "w = os.environ.get(f'ENVDUELS_{x}')\nv = 'ENVDUELS_IN' in os.environ\n"
        "child = {**os.environ, 'ENVDUELS_WAREHOUSE': 'w.duckdb'}\nkeys = {'ENVDUELS_NOT_ENV': 1}['ENVDUELS_NOT_ENV']\n")
    assert env_reads(probe) == {"ENVDUELS_HOME", "ENVDUELS_COPY", "ENVDUELS_DBT_PARENT_PID", "ENVDUELS_G",
                                "ENVDUELS_*", "ENVDUELS_IN"}


def _readers(under: str = "") -> dict[str, list[str]]:
    return {rel: names for p in (PACKAGE / under).rglob("*.py")
            if (names := sorted(env_reads(p))) and not (rel := str(p.relative_to(PACKAGE))).startswith("settings/")}


def test_the_engine_reads_no_variable_itself():
    """core/ is given every setting by its callers (settings/ parses them): the registry file, the overall
    spending cap, litellm's worker processes, ENVDUELS_HOME's stored experiment (issue 47's named gap)."""
    assert _readers("core") == {}, "the engine reads a variable: take the value as a parameter and have the " \
                                   "callers (resources/, cli/, assets/) pass settings.variables.value(name)"


def test_nothing_outside_settings_reads_a_variable_itself():
    bad = _readers()
    assert bad == {}, f"{bad}: read a setting with settings.variables.value(name) (one parser, one check)"


@pytest.mark.parametrize(("name", "text", "message"), [
    ("ENVDUELS_AUTHOR_WAVE", "0", "ENVDUELS_AUTHOR_WAVE='0' cannot be used: wave size 0: a whole number of slots "
                                  "from 1 to 1000 is needed"),
    ("ENVDUELS_STORAGE", "cloud", "ENVDUELS_STORAGE='cloud' is not accepted: expected one of embedded, shared"),
])
def test_a_bad_variable_is_refused_up_front_naming_it(name, text, message):
    with pytest.raises(SettingsError) as info:
        check_settings({name: text})
    assert str(info.value).startswith(message)


def test_the_shared_profile_needs_its_postgres_url_up_front():
    with pytest.raises(SettingsError, match=r"^ENVDUELS_STORAGE=shared needs ENVDUELS_POSTGRES_URL=postgresql\+psycopg2"):
        check_settings({"ENVDUELS_STORAGE": "shared"})
    got = check_settings({"ENVDUELS_STORAGE": "shared", "ENVDUELS_POSTGRES_URL": "postgresql+psycopg2://u:p@h:5/db"})
    assert got["ENVDUELS_POSTGRES_URL"] == "postgresql://u:p@h:5/db"


def test_a_bad_budget_is_left_to_the_commands_that_spend():
    """``envduels show`` with a bad ENVDUELS_BUDGET_USD works as before; a spending command says "budget: ..."."""
    from envduels_dagster.core.models.budget import BudgetError

    check_settings({"ENVDUELS_BUDGET_USD": "-3"})
    with pytest.raises(BudgetError, match="ENVDUELS_BUDGET_USD='-3' cannot be used"):
        value("ENVDUELS_BUDGET_USD", {"ENVDUELS_BUDGET_USD": "-3"})
