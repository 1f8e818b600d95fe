"""The dbt project of the marts (``dbt_project/``) as a ``DbtProject``, and how its manifest is prepared.

Why a module of its own: ``dagster-dbt project prepare-and-package --file`` imports the file
that defines the project; keeping it small lets ``make install`` and the demo prepare the
manifest without loading the whole code location. ``prepare_if_dev`` re-parses only under
``dagster dev`` (so the UI follows edits to the SQL), and only when a project file is newer
than the manifest: run workers of ``dagster dev`` inherit its flag and load the definitions
too, and a ``dbt parse`` costs 5-10 s. Everywhere else the manifest is prepared explicitly
(:func:`prepare_manifest`) and loading the definitions runs dbt only when no manifest exists at all.

Why parse on first load when missing (issue 34): ``pip install .`` from a clean clone, ``pip install
git+...`` or any build whose checkout never ran ``make install`` makes a wheel without a manifest (its
isolated build environment has no dbt), and loading the code location then failed with
``DagsterDbtManifestNotFoundError``. Such an installed package parses once into a writable cache
directory keyed by a digest of the dbt project's files (:func:`manifest_cache_dir`; ~5-10 s, recorded in
docs/BENCHMARKS.md), never into site-packages; later loads find it there. A wheel built from a checkout
that ran ``make install`` (or the Dockerfile) carries its manifest and never parses.
"""

import hashlib
import os
import sys
import tempfile
from functools import cache
from pathlib import Path

from envduels_dagster.core.storage.project_files import in_checkout, project_file


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
    if not project.manifest_path.exists() and not in_checkout():
        # an installed package without a carried manifest: parse into a writable cache (see the module doc)
        project = DbtProject(project_dir=DBT_PROJECT_DIR, profiles_dir=DBT_PROJECT_DIR,
                             target_path=manifest_cache_dir(Path(DBT_PROJECT_DIR)))
    if not manifest_is_current(project):
        project.prepare_if_dev()
    if not project.manifest_path.exists():
        prepare_manifest(project=project)
    return project


def project_digest(project_dir: Path) -> str:
    """A digest of the dbt project's input files (names and contents): the cache key of its manifest."""
    digest = hashlib.sha256()
    for name in _PROJECT_INPUTS:
        path = project_dir / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else []
        for f in files:
            digest.update(str(f.relative_to(project_dir)).encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def manifest_cache_dir(project_dir: Path) -> Path:
    """Where an installed package without a manifest keeps the one it parses: ``ENVDUELS_DBT_CACHE``, else
    ``$XDG_CACHE_HOME`` (default ``~/.cache``)``/envduels``, else the temporary directory when that is not
    writable; one subdirectory per digest of the project's files, so an upgrade never reads a stale one."""
    from envduels_dagster.settings.variables import text_value

    roots = [text_value("ENVDUELS_DBT_CACHE"),
             str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "envduels"),
             str(Path(tempfile.gettempdir()) / f"envduels-{os.getuid()}")]
    for root in filter(None, roots):
        path = Path(root) / f"dbt-manifest-{project_digest(project_dir)}"
        try:
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError:
            continue
        if os.access(path, os.W_OK):
            return path
    raise RuntimeError(f"no writable directory for the dbt manifest (tried {', '.join(filter(None, roots))}); "
                       "set ENVDUELS_DBT_CACHE to one")


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


def prepare_manifest(force: bool = False, project: DbtProject | None = None) -> Path:
    """Write the project's ``target/manifest.json`` with ``dbt parse`` unless it is present and current.

    Called explicitly by the demo and the tests (``make install`` runs ``dbt parse`` itself); loading
    the definitions never calls it. The new manifest is swapped in atomically, so a concurrent loader
    never reads half a file. Offline, ~5-10 s.
    """
    import subprocess
    import time

    from envduels_dagster.assets.marts.dbt_cli import offline_dbt_executable

    project = project or marts_project()
    manifest = Path(project.manifest_path)
    if not force and manifest_is_current(project):
        return manifest
    manifest.parent.mkdir(parents=True, exist_ok=True)
    print(f"envduels: preparing the dbt manifest ({manifest}) with `dbt parse`...", file=sys.stderr, flush=True)
    project_dir = str(project.project_dir)
    logs = Path(project_dir) / "logs" if in_checkout() else manifest.parent / "logs"  # never into site-packages
    env = {**os.environ, "DBT_PROFILES_DIR": project_dir, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
           "DBT_LOG_PATH": str(logs)}
    t0 = time.perf_counter()
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
    print(f"envduels: dbt manifest prepared in {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)
    return manifest
