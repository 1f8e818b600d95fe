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
# Modules that still read a variable from the environment themselves, and why (each a known debt or a process
# that never loads the settings). A new reader outside settings/ fails until it goes through value() or is
# listed here with its reason.
READERS_ALLOWED = {
    "core/models/registry.py": "ENVDUELS_REGISTRY: the engine's default registry path (the registry module is "
                               "being reworked on branch r47cfg; then the caller passes it in)",
    "core/models/budget.py": "ENVDUELS_BUDGET_USD via budget_from_env, parsed by parse_budget as the table's row is",
    "core/models/gateway.py": "ENVDUELS_LITELLM_PROCESSES when a caller passes none (the gateway's constructor is "
                              "being reworked on branch r47cfg)",
    "dbt_plugins/warehouse.py": "ENVDUELS_WAREHOUSE: internal, read inside dbt's own process",
    "assets/marts/dbt_cli.py": "ENVDUELS_DBT_PARENT_PID: internal, read inside the dbt child process",
}


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


def env_reads(path: Path) -> set[str]:
    """The ENVDUELS_* names a module reads from the environment (os.environ.get / [] / os.getenv), constants
    resolved; setting one for a child process is not a read."""
    tree = ast.parse(path.read_text())
    consts = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
              for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value.value, str)}

    def name_of(node) -> str | None:
        got = node.value if isinstance(node, ast.Constant) else consts.get(node.id) if isinstance(node, ast.Name) \
            else None
        return got if isinstance(got, str) and got.startswith("ENVDUELS_") else None

    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args and (
                node.func.attr == "getenv" or (node.func.attr == "get" and isinstance(node.func.value, ast.Attribute)
                                               and node.func.value.attr == "environ")):
            found.add(name_of(node.args[0]))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and \
                isinstance(node.value, ast.Attribute) and node.value.attr == "environ":
            found.add(name_of(node.slice))
    return found - {None}


def test_the_reader_finder_sees_reads_and_not_writes(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import os\nVAR = 'ENVDUELS_B'\na = os.environ.get('ENVDUELS_A')\nb = os.environ[VAR]\n"
                     "c = os.getenv('ENVDUELS_C')\nos.environ['ENVDUELS_D'] = '1'\nd = os.environ.get('HOME')\n")
    assert env_reads(probe) == {"ENVDUELS_A", "ENVDUELS_B", "ENVDUELS_C"}


def test_nothing_outside_settings_reads_a_variable_itself():
    readers = {str(p.relative_to(PACKAGE)): sorted(env_reads(p)) for p in PACKAGE.rglob("*.py")
               if not str(p.relative_to(PACKAGE)).startswith("settings/")}
    bad = {rel: names for rel, names in readers.items() if names and rel not in READERS_ALLOWED}
    assert bad == {}, f"{bad}: read a setting with settings.variables.value(name) (one parser, one check)"
    stale = sorted(rel for rel in READERS_ALLOWED if not readers.get(rel))
    assert stale == [], f"READERS_ALLOWED lists {stale}, which read no variable any more: remove them"


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
