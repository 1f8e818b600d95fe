"""The code location loads without side effects, and its shape only changes on purpose.

* Importing ``envduels_dagster.definitions`` (and building ``defs()``, what ``dagster dev``
  does) in a fresh interpreter creates no file or directory in the working directory,
  ENVDUELS_HOME or the repository, and leaves ``os.environ`` exactly as it was.
* The asset keys, partitions, checks, jobs, sensors, schedules, automation conditions and
  groups equal ``tests/snapshots/code_location.json``; after an intended change run
  ``make snapshot`` and review the diff.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.code_location import SNAPSHOT
from tests.helpers.paths import REPO

SKIP = {".git", ".venv", "__pycache__", ".pytest_cache"}

PROBE = """
import json, os, sys
before = dict(os.environ)
import envduels_dagster.definitions as d
imported = dict(os.environ)
built = d.defs() if sys.argv[1] == "load" else None
after = dict(os.environ)
changed = lambda a, b: sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
print(json.dumps({"import": changed(before, imported), "load": changed(before, after),
                  "assets": len(list(built.assets)) if built else 0}))
"""


def tree(root: Path) -> set[str]:
    if not root.exists():
        return set()
    out = set()
    for path, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP]
        rel = Path(path).relative_to(root)
        out |= {str(rel / name) for name in dirs + files}
    return out


@pytest.mark.slow  # a few seconds or more (measured with --durations, loaded 2-core machine)
@pytest.mark.parametrize("mode", ["import", "load"])
def test_loading_the_definitions_writes_nothing_and_changes_no_environment_variable(tmp_path, mode):
    from envduels_dagster.assets.marts.project import prepare_manifest

    prepare_manifest()  # the one thing loading needs; prepared explicitly (make install / demo / tests)
    cwd, home = tmp_path / "cwd", tmp_path / "home"
    cwd.mkdir()
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVDUELS_", "DAGSTER_"))}
    env.update(ENVDUELS_HOME=str(home), PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(REPO))
    before = {p: tree(p) for p in (cwd, home, REPO)}
    out = subprocess.run([sys.executable, "-c", PROBE, mode], cwd=cwd, env=env, capture_output=True, text=True,
                         check=True, timeout=300)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["import"] == [] and report["load"] == []
    assert mode == "import" or report["assets"] >= 10
    for path, listing in before.items():
        assert tree(path) == listing, f"loading the definitions wrote under {path}: {tree(path) ^ listing}"
    assert list(home.iterdir()) == [] and list(cwd.iterdir()) == []


def test_importing_the_definitions_module_imports_no_heavy_library():
    code = ("import sys, envduels_dagster.definitions; print(','.join(m for m in "
            "('pandas', 'numpy', 'dagster_dbt', 'dbt.version', 'great_expectations', 'litellm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_building_the_definitions_imports_no_numpy_or_pandas():
    """What a code server or run worker does before any step runs: build every area's definitions. The checks
    modules import numpy and pandas inside their functions (a module-level import slipped in once)."""
    code = ("import sys, envduels_dagster.definitions as d; d.defs(); "
            "print(','.join(m for m in ('pandas', 'numpy', 'great_expectations', 'litellm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_the_code_location_matches_its_snapshot():
    env = {k: v for k, v in os.environ.items() if k not in ("ENVDUELS_ROUNDS", "ENVDUELS_STALE_CRON")}
    out = subprocess.run([sys.executable, str(REPO / "tests" / "code_location.py")], cwd=REPO, env=env,
                         capture_output=True, text=True, check=True, timeout=300)
    current, committed = json.loads(out.stdout), json.loads(SNAPSHOT.read_text())
    for section in committed:
        assert current[section] == committed[section], (
            f"the code location's {section} changed; if intended, run `make snapshot` and commit the diff")
    assert set(current) == set(committed)


def test_the_snapshot_names_every_area_and_the_published_sensors_and_schedules():
    snap = json.loads(SNAPSHOT.read_text())
    groups = {a["group"] for a in snap["assets"].values()}
    assert groups == {"registry", "duel", "coevolution", "marts", "rankings", "training", "report"}
    assert set(snap["sensors"]) == {"envduels_requests", "envduels_automation"}
    assert set(snap["schedules"]) == set()  # stale partitions are found by envduels_requests
    assert snap["jobs"]["author_job"] == ["authored_environments"] and snap["jobs"]["pair_job"] == ["duel_episodes"]
    assert set(snap["jobs"]) == {"author_job", "pair_job", "hardened_r1_job", "pairs_r1_job", "downstream_job",
                                 "learner_job", "studies_job", "import_job"}
    assert snap["jobs"]["import_job"] == ["authored_environments"]  # envduels import: partition import:<name>
    assert all(c["blocking"] for k, c in snap["asset_checks"].items() if k.startswith(("training_set", "training_export")))


def test_every_asset_has_a_code_version():
    """A constant per Python asset, bumped when its logic changes (docs/DECISIONS.md, "Code and data versions");
    dbt models carry dagster-dbt's checksum of their SQL. Without one Dagster versions every run as new."""
    snap = json.loads(SNAPSHOT.read_text())
    missing = sorted(k for k, a in snap["assets"].items() if not a["code_version"])
    assert not missing, f"assets without code_version=...: {missing}"
