"""The built wheel works outside the source tree: it loads the code location and materializes a pair.

Why: a container image or a Dagster code server installs the package, not the checkout. Before
the wheel carried its project files, loading failed with "`dbt parse` failed ... No
dbt_project.yml found". This test builds the wheel from a copy of the project (the checkout
stays clean), installs it into a fresh virtual environment and runs the registry, one author,
one pair and the dbt marts there, from a directory with no project files, with the registry and
the dbt project the wheel carries. Dependencies come from the test's own environment through a
path entry (no download); the package itself only from the wheel. The build uses pip's isolated build
environment (setuptools from the package index, as any user's build does; pip's cache usually serves it).
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import venv
import zipfile

import pytest

from tests.helpers.paths import REPO

pytestmark = pytest.mark.slow

ROOT = REPO
PROJECT = ["pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "models.yaml", "dagster.yaml", "workspace.yaml",
           "envduels_dagster", "dbt_project", "deploy"]

SCRIPT = r'''
import json, sys
from pathlib import Path
import dagster as dg
import envduels_dagster
from envduels_dagster import project_files
from envduels_dagster.assets.marts.project import prepare_manifest
from envduels_dagster.assets.registry.partitions import pair_key, register_models
from envduels_dagster.core.registry import load_registry, registry_path
from envduels_dagster.definitions import build_definitions, build_resources
from envduels_dagster.resources import DuelSettings

prepare_manifest()
defs = build_definitions()
by_name = {k.to_user_string(): a for a in defs.assets for k in a.keys}
resources = build_resources(settings=DuelSettings(envs_per_author=2, benchmark_seeds=[0, 1]))
quiet = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
with dg.DagsterInstance.ephemeral() as instance:
    register_models(instance, load_registry(None).names)
    done = []
    for name, key in [("model_registry", None), ("authored_environments", "oracle"),
                      ("duel_episodes", pair_key("oracle", "novice")), ("pair_lift", None)]:
        result = dg.materialize([by_name[name]], instance=instance, resources=resources, partition_key=key,
                                run_config=quiet, raise_on_error=False)
        assert result.success, (name, [e.message for e in result.all_events if e.is_failure])
        done.append(name)
import duckdb
from envduels_dagster.settings import warehouse_path
with duckdb.connect(str(warehouse_path()), read_only=True) as conn:
    episodes = conn.execute("SELECT count(*) FROM episodes").fetchone()[0]
    lift = conn.execute("SELECT count(*) FROM pair_lift").fetchone()[0]
print(json.dumps({"package": envduels_dagster.__file__, "in_checkout": project_files.in_checkout(),
                  "registry": str(registry_path()), "dbt_project": str(project_files.project_file("dbt_project")),
                  "done": done, "episodes": episodes, "pair_lift_rows": lift}))
'''


def test_the_wheel_carries_its_project_files_and_runs_a_pair_outside_the_source_tree(tmp_path):
    import json

    src = tmp_path / "src"
    src.mkdir()
    for name in PROJECT:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "logs", "*.egg-info"))
        else:
            shutil.copy2(path, src / name)
    if not (src / "dbt_project" / "target" / "manifest.json").exists():
        pytest.skip("no prepared dbt manifest (make install runs dbt parse)")
    dist = tmp_path / "dist"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                            "-w", str(dist), str(src)], capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = dist.glob("envduels_dagster-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for carried in ["envduels_dagster/_project/dbt_project/dbt_project.yml",
                    "envduels_dagster/_project/dbt_project/profiles.yml",
                    "envduels_dagster/_project/dbt_project/target/manifest.json",
                    "envduels_dagster/_project/models.yaml", "envduels_dagster/_project/dagster.yaml",
                    "envduels_dagster/_project/deploy/dagster-postgres.yaml"]:
        assert carried in names, f"the wheel lacks {carried}"
    assert not any(n.startswith("envduels_dagster/_project/dbt_project/logs/") for n in names)

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                              "--no-index", "-q", str(wheel)], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr[-3000:]
    # Dependencies: this environment's site-packages as a plain path entry (its .pth files, among them
    # the checkout's editable install, are not processed), after the fresh environment's own.
    (own,) = (env_dir / "lib").glob("python3*/site-packages")
    (own / "envduels-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVDUELS_", "DAGSTER_", "PYTHON"))}
    env.update(ENVDUELS_HOME=str(outside / "data"), PATH=f"{env_dir / 'bin'}:{env.get('PATH', '')}")
    proc = subprocess.run([str(python), "-c", SCRIPT], cwd=outside, env=env, capture_output=True, text=True,
                          timeout=400)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-4000:])
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["package"].startswith(str(env_dir)) and not report["in_checkout"]
    assert report["registry"].startswith(str(env_dir)) and report["dbt_project"].startswith(str(env_dir))
    assert report["done"] == ["model_registry", "authored_environments", "duel_episodes", "pair_lift"]
    assert report["episodes"] > 0 and report["pair_lift_rows"] == 1
