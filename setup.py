"""Build hook: the wheel carries the project files a code server needs (see envduels_dagster/core/storage/project_files.py).

Why a hook and not moving the files into the package: ``dbt_project/``, ``models.yaml`` and
``dagster.yaml`` stay where users and dbt expect them in a checkout; a non-editable build copies
them (plus the prepared dbt manifest, when ``make install`` wrote one) into
``envduels_dagster/_project/``. Without them an installed package cannot load the code location
("`dbt parse` failed ... No dbt_project.yml found"). Everything else is in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
FILES = ("models.yaml", "dagster.yaml", "workspace.yaml", "deploy/dagster-postgres.yaml")
SKIP = shutil.ignore_patterns("logs", "dbt_packages", "target", "*.pyc", "__pycache__")


class BuildWithProjectFiles(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads them from the checkout
        dest = Path(self.build_lib) / "envduels_dagster" / "_project"
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(ROOT / "dbt_project", dest / "dbt_project", ignore=SKIP)
        manifest = ROOT / "dbt_project" / "target" / "manifest.json"
        if manifest.exists():
            (dest / "dbt_project" / "target").mkdir(parents=True)
            shutil.copy2(manifest, dest / "dbt_project" / "target" / "manifest.json")
        for name in FILES:
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)


setup(cmdclass={"build_py": BuildWithProjectFiles})
