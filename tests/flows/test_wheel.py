"""A plain ``pip install .`` from a clean clone works outside the source tree: it loads the code location and
materializes a pair.

Why: a container image or a Dagster code server installs the package, not the checkout. Before
the wheel carried its project files, loading failed with "`dbt parse` failed ... No
dbt_project.yml found"; before issue 34, a clone that never ran ``make install`` (no dbt manifest)
made a wheel whose definitions failed to load with ``DagsterDbtManifestNotFoundError``. This test
copies the project's tracked files without ``dbt_project/target`` (a clean clone; the checkout stays
clean), installs it non-editable (``pip install <dir>``) into a fresh virtual environment and, from a
directory with no project files, loads the definitions (which parse the manifest once into the user's
cache directory, never into site-packages), then runs the registry, one author, one pair and the dbt
marts; a second process loads again without parsing. Dependencies come from the test's own
environment through a path entry (no download); the package itself only from the copy. The build uses
pip's isolated build environment (setuptools from the package index, as any user's build does).
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import venv

import pytest

from tests.helpers.paths import REPO

pytestmark = pytest.mark.slow

ROOT = REPO
PROJECT = ["pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "models.yaml", "dagster.yaml", "workspace.yaml",
           "envduels_dagster", "dbt_project", "deploy"]
UNTRACKED = shutil.ignore_patterns("__pycache__", "logs", "target", "*.egg-info", "dbt_packages")  # a clean clone

SCRIPT = r'''
import json, sys, time
from pathlib import Path
t0 = time.perf_counter()
import dagster as dg
import envduels_dagster
from envduels_dagster.core.storage import project_files
from envduels_dagster.assets.marts.project import marts_project
from envduels_dagster.assets.registry.partitions import pair_key, register_models
from envduels_dagster.core.models.registry import load_registry
from envduels_dagster.settings.locations import registry_file
from envduels_dagster.definitions import build_definitions, build_resources
from envduels_dagster.resources import DuelSettings

defs = build_definitions()  # no prepare_manifest(): loading alone must work
load_s = time.perf_counter() - t0
manifest = str(marts_project().manifest_path)
if sys.argv[1:] == ["load-only"]:
    print(json.dumps({"load_s": load_s, "manifest": manifest}))
    sys.exit(0)
by_name = {k.to_user_string(): a for a in defs.assets for k in a.keys}
resources = build_resources(settings=DuelSettings(envs_per_author=2, benchmark_seeds=[0, 1]))
quiet = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
with dg.DagsterInstance.ephemeral() as instance:
    register_models(instance, load_registry(registry_file()).names)
    done = []
    for name, key in [("model_registry", None), ("authored_environments", "oracle"),
                      ("duel_episodes", pair_key("oracle", "novice")), ("pair_lift", None)]:
        result = dg.materialize([by_name[name]], instance=instance, resources=resources, partition_key=key,
                                run_config=quiet, raise_on_error=False)
        assert result.success, (name, [e.message for e in result.all_events if e.is_failure])
        done.append(name)
import duckdb
from envduels_dagster.settings.locations import warehouse_path
with duckdb.connect(str(warehouse_path()), read_only=True) as conn:
    episodes = conn.execute("SELECT count(*) FROM episodes").fetchone()[0]
    lift = conn.execute("SELECT count(*) FROM pair_lift").fetchone()[0]
print(json.dumps({"load_s": load_s, "manifest": manifest, "package": envduels_dagster.__file__, "in_checkout": project_files.in_checkout(),
                  "registry": str(registry_file()), "dbt_project": str(project_files.project_file("dbt_project")),
                  "done": done, "episodes": episodes, "pair_lift_rows": lift}))
'''


def test_a_plain_install_of_a_clean_clone_loads_and_runs_a_pair_outside_the_source_tree(tmp_path):
    import json

    src = tmp_path / "src"
    src.mkdir()
    for name in PROJECT:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=UNTRACKED)
        else:
            shutil.copy2(path, src / name)
    assert not (src / "dbt_project" / "target").exists()

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
                              str(src)], capture_output=True, text=True, cwd=tmp_path)
    assert install.returncode == 0, install.stderr[-3000:]
    (own,) = (env_dir / "lib").glob("python3*/site-packages")
    packaged = own / "envduels_dagster" / "_project"
    for carried in ["dbt_project/dbt_project.yml", "dbt_project/profiles.yml", "models.yaml", "dagster.yaml",
                    "deploy/dagster-postgres.yaml"]:
        assert (packaged / carried).exists(), f"the install lacks {carried}"
    assert not (packaged / "dbt_project" / "target").exists() and not (packaged / "dbt_project" / "logs").exists()
    # Dependencies: this environment's site-packages as a plain path entry (its .pth files, among them
    # the checkout's editable install, are not processed), after the fresh environment's own.
    (own / "envduels-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVDUELS_", "DAGSTER_", "PYTHON", "XDG_"))}
    env.update(ENVDUELS_HOME=str(outside / "data"), HOME=str(home), PATH=f"{env_dir / 'bin'}:{env.get('PATH', '')}")
    proc = subprocess.run([str(python), "-c", SCRIPT], cwd=outside, env=env, capture_output=True, text=True,
                          timeout=400)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-4000:])
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["package"].startswith(str(env_dir)) and not report["in_checkout"]
    assert report["registry"].startswith(str(env_dir)) and report["dbt_project"].startswith(str(env_dir))
    assert report["done"] == ["model_registry", "authored_environments", "duel_episodes", "pair_lift"]
    assert report["episodes"] > 0 and report["pair_lift_rows"] == 1
    # parsed once, into the user's cache, and nothing written into the installed package
    assert report["manifest"].startswith(str(home / ".cache" / "envduels" / "dbt-manifest-")), report["manifest"]
    assert "preparing the dbt manifest" in proc.stderr
    assert not (packaged / "dbt_project" / "target").exists() and not (packaged / "dbt_project" / "logs").exists()
    again = subprocess.run([str(python), "-c", SCRIPT, "load-only"], cwd=outside, env=env, capture_output=True,
                           text=True, timeout=200)
    assert again.returncode == 0, again.stderr[-4000:]
    assert json.loads(again.stdout.strip().splitlines()[-1])["manifest"] == report["manifest"]
    assert "preparing the dbt manifest" not in again.stderr  # the second load finds the cached manifest
    print(f"first load (with dbt parse) {report['load_s']:.1f}s, second load "
          f"{json.loads(again.stdout.strip().splitlines()[-1])['load_s']:.1f}s")
