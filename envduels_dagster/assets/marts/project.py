"""The dbt project of the marts (``dbt_project/``) as a ``DbtProject``, and how its manifest is prepared.

Why a module of its own: ``dagster-dbt project prepare-and-package --file`` imports the file
that defines the project; keeping it small lets ``make install`` and the demo prepare the
manifest without loading the whole code location. ``prepare_if_dev`` re-parses only under
``dagster dev`` (so the UI follows edits to the SQL), and only when a project file is newer
than the manifest: run workers of ``dagster dev`` inherit its flag and load the definitions
too, and a ``dbt parse`` costs 5-10 s. Everywhere else the manifest is prepared explicitly
(:func:`prepare_manifest`) and loading the definitions never runs dbt.
"""

import sys
from functools import cache
from pathlib import Path

from envduels_dagster.project_files import project_file


def import_dagster_dbt():
    """dagster-dbt without dbt-core in this process: dbt runs only as the ``envduels-dbt`` executable.

    Why: with dbt-core importable, dagster-dbt imports it (~1.3 s on every load of the code
    location) and evaluates the asset selection with dbt's ``Manifest``, whose multiprocessing
    lock starts a ``resource_tracker`` child process in every process that loads the definitions
    (webserver, daemon, each step, pytest). dagster-dbt supports running without dbt-core in the
    orchestrating process (the dbt Fusion setup): the selection is then read from the manifest.
    Hiding ``dbt.version`` while dagster-dbt is first imported is how we choose that mode.
    """
    if "dagster_dbt" in sys.modules or "dbt.version" in sys.modules:
        import dagster_dbt

        return dagster_dbt
    sys.modules["dbt.version"] = None  # type: ignore[assignment]  # `from dbt.version import ...` fails
    try:
        import dagster_dbt
    finally:
        if sys.modules.get("dbt.version", ...) is None:
            del sys.modules["dbt.version"]
    return dagster_dbt


DbtProject = import_dagster_dbt().DbtProject

DBT_PROJECT_DIR = project_file("dbt_project")  # the checkout's, or the copy in an installed wheel


@cache
def marts_project() -> DbtProject:
    project = DbtProject(project_dir=DBT_PROJECT_DIR, profiles_dir=DBT_PROJECT_DIR)
    if not manifest_is_current(project):
        project.prepare_if_dev()
    return project


_PROJECT_INPUTS = ("dbt_project.yml", "profiles.yml", "models", "tests", "macros")


def _newest_input_mtime(project_dir: Path) -> float:
    newest = 0.0
    for name in _PROJECT_INPUTS:
        path = project_dir / name
        if path.is_file():
            newest = max(newest, path.stat().st_mtime)
        elif path.is_dir():
            newest = max([newest, *(p.stat().st_mtime for p in path.rglob("*") if p.is_file())])
    return newest


def manifest_is_current(project: DbtProject | None = None) -> bool:
    project = project or marts_project()
    manifest = project.manifest_path
    return manifest.exists() and manifest.stat().st_mtime >= _newest_input_mtime(Path(project.project_dir))


def prepare_manifest(force: bool = False) -> Path:
    """Write the project's ``target/manifest.json`` with ``dbt parse`` unless it is present and current.

    Called explicitly by the demo and the tests (``make install`` runs ``dbt parse`` itself); loading
    the definitions never calls it. The new manifest is swapped in atomically, so a concurrent loader
    never reads half a file. Offline, ~5-10 s.
    """
    import os
    import subprocess
    import sys
    import tempfile

    from envduels_dagster.assets.marts.dbt_cli import offline_dbt_executable

    project = marts_project()
    manifest = Path(project.manifest_path)
    if not force and manifest_is_current(project):
        return manifest
    manifest.parent.mkdir(parents=True, exist_ok=True)
    print(f"envduels: preparing the dbt manifest ({manifest}) with `dbt parse`...", file=sys.stderr, flush=True)
    project_dir = str(project.project_dir)
    env = {**os.environ, "DBT_PROFILES_DIR": project_dir, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
           "DBT_LOG_PATH": str(Path(project_dir) / "logs")}
    with tempfile.TemporaryDirectory(dir=manifest.parent, prefix="parse-") as tmp:
        proc = subprocess.run([offline_dbt_executable(), "parse", "--project-dir", project_dir,
                               "--profiles-dir", project_dir, "--target-path", tmp],
                              cwd=project_dir, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"`dbt parse` failed in {project_dir}:\n{proc.stdout}\n{proc.stderr}")
        # the saved parse first, then the manifest (whose mtime says "current"): builds copy the saved
        # parse into their own target directory and skip parsing (dbt_project.yml: partial_parse)
        saved = Path(tmp) / "partial_parse.msgpack"
        if saved.exists():
            os.replace(saved, manifest.parent / saved.name)
        os.replace(Path(tmp) / "manifest.json", manifest)
    return manifest
