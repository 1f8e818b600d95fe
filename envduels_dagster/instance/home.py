"""The instance home (``DAGSTER_HOME``): created with the project's ``dagster.yaml``, and an existing one's
module paths brought up to date.

Why an upgrade: the plugins ``dagster.yaml`` names moved from the package root into ``instance/`` (issue 47).
A home prepared before names ``envduels_dagster.run_launcher``, ``.run_coordinator`` and ``.instance_storage``;
those still load (``legacy_paths/``), and the commands that prepare the home (``demo``, ``run``, ``import``,
``ui``) rewrite them to the new paths once: only those ``module:`` values change, the rest of the file (the
user's own settings and comments) stays byte for byte, and the file is replaced whole (a temporary file and a
rename), so Dagster never reads half of it. Nothing here runs at import time.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from envduels_dagster.core.storage.project_files import project_file

# old dotted path (what dagster.yaml named before issue 47) -> where the module is now
MOVED_MODULES = {
    "envduels_dagster.instance_storage": "envduels_dagster.instance.storage",
    "envduels_dagster.run_coordinator": "envduels_dagster.instance.run_coordinator",
    "envduels_dagster.run_launcher": "envduels_dagster.instance.run_launcher",
}
_OLD_MODULE = re.compile(r"^(\s*module:\s*[\"']?)(" + "|".join(re.escape(m) for m in MOVED_MODULES) + r")(?=[\"']?\s*(#.*)?$)",
                         re.M)


def template() -> Path:
    """The project's instance settings for this storage profile (the shared one's instance is on Postgres)."""
    from envduels_dagster.settings.locations import storage_profile

    return project_file("deploy/dagster-postgres.yaml" if storage_profile() == "shared" else "dagster.yaml")


def prepare_instance_home() -> Path:
    """DAGSTER_HOME (set in this process's environment), with the project's dagster.yaml when it has none, and
    an existing one's old module paths upgraded in place (``upgrade_module_paths``)."""
    from envduels_dagster.settings.locations import dagster_home

    home = dagster_home()
    os.environ["DAGSTER_HOME"] = str(home)
    target = home / "dagster.yaml"
    source = template()
    if not target.exists() and source.exists():
        shutil.copy(source, target)
    elif target.exists():
        upgrade_module_paths(target)
    return home


def upgrade_module_paths(path: Path, say=lambda line: print(line, file=sys.stderr, flush=True)) -> list[str]:
    """Rewrite the ``module:`` values of ``path`` that name a moved module to its new path; the old paths found.

    Says what it changed (one line on stderr). A file it cannot rewrite (read-only home, full disk) is left as it
    was, with a line saying so: the old paths still load, so the command goes on."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        say(f"envduels: {path}: could not read it to check its module paths ({exc}); left as it is")
        return []
    found = sorted({m.group(2) for m in _OLD_MODULE.finditer(text)})
    if not found:
        return []
    new = _OLD_MODULE.sub(lambda m: m.group(1) + MOVED_MODULES[m.group(2)], text)
    tmp = None
    try:
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=".dagster.yaml.", delete=False) as out:
            tmp = Path(out.name)
            out.write(new)
            out.flush()
            os.fsync(out.fileno())
        shutil.copymode(path, tmp)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        say(f"envduels: {path}: names the old module paths {', '.join(found)} and could not be rewritten ({exc}); "
            "they still load, but make the file writable or replace each with its envduels_dagster.instance.* path")
        return found
    say(f"envduels: {path}: upgraded the module paths " + ", ".join(f"{m} -> {MOVED_MODULES[m]}" for m in found)
        + " (the plugins moved into envduels_dagster/instance/; nothing else in the file changed)")
    return found
