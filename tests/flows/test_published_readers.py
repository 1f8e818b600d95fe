"""Readers of the published training set are never blocked by writers (real processes).

DuckDB refuses every other process while one holds ``warehouse.duckdb`` for writing (a pair run for
its transaction, dbt for a whole build). Consumers read the published snapshot instead: this test
reads it over and over while another process plays a pair and runs the dbt build into the warehouse,
and shows both that the warehouse was locked meanwhile and that every read of the snapshot succeeded.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from envduels_dagster.assets.training.assets import training_set
from envduels_dagster.assets.training.checks import training_set_checks
from envduels_dagster.core.training.publication import read_snapshot
from tests.helpers.paths import REPO
from tests.helpers.pipeline import pipeline_resources, play_round0, write_registry

MODELS = ["expert", "novice"]

WRITER = """
import sys, dagster as dg
sys.path.insert(0, {repo!r})
from tests.helpers.pipeline import pipeline_resources
from pathlib import Path
from envduels_dagster.assets.duels.assets import duel_episodes
from envduels_dagster.assets.marts.dbt import build_dbt_marts
from envduels_dagster.assets.registry.partitions import pair_key
tmp = Path({tmp!r})
resources = pipeline_resources(tmp, tmp / "models.yaml", 2, (0, 1, 2))
instance = dg.DagsterInstance.from_config({dagster_home!r})
for a, s in (("expert", "novice"), ("novice", "expert")):
    assert dg.materialize([duel_episodes], instance=instance, resources=resources, partition_key=pair_key(a, s)).success
assert dg.materialize([build_dbt_marts()], instance=instance, resources=resources).success
print("WRITER DONE", flush=True)
"""


def warehouse_locked(db: Path) -> bool:
    """Whether any process holds a lock on the warehouse file, asked of the kernel (``/proc/locks``).

    Probing by opening the file read-only would itself take a shared lock, and a writer starting at
    that instant (dbt opens the warehouse once per build) would then fail on the probe's lock rather
    than on anything the product does.
    """
    try:
        st = db.stat()
    except FileNotFoundError:
        return False
    ident = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        # "1: POSIX  ADVISORY  WRITE 31785 fe:00:1234 0 EOF": major:minor:inode in the sixth field
        if len(fields) > 5 and fields[5] == ident:
            return True
    return False


@pytest.mark.slow
def test_published_training_set_reads_while_a_pair_run_and_a_dbt_build_write(tmp_path, envduels_home):
    registry = write_registry(tmp_path / "models.yaml", MODELS)
    resources = pipeline_resources(tmp_path, registry, 2, (0, 1))
    dagster_home = tmp_path / "dagster"
    dagster_home.mkdir()
    with dg.instance_for_test(temp_dir=str(dagster_home)) as instance:
        play_round0(instance, resources, MODELS)
        for m in MODELS:
            # published once its blocking checks passed (write-audit-publish)
            assert dg.materialize([training_set, training_set_checks], instance=instance, resources=resources,
                                  partition_key=m).success
        published = envduels_home / "published"
        expected = {m: read_snapshot(published, "training_set", [m]) for m in MODELS}

        log = tmp_path / "writer.log"
        with open(log, "w") as out:
            writer = subprocess.Popen([sys.executable, "-c", WRITER.format(repo=str(REPO), tmp=str(tmp_path),
                                                                          dagster_home=str(dagster_home))],
                                      cwd=REPO, env={**os.environ, "PATH": f"{Path(sys.executable).parent}:"
                                                                             f"{os.environ['PATH']}"},
                                      stdout=out, stderr=subprocess.STDOUT)
            reads, locked_reads, slowest = 0, 0, 0.0
            deadline = time.monotonic() + 400
            while writer.poll() is None and time.monotonic() < deadline:
                locked = warehouse_locked(tmp_path / "warehouse.duckdb")
                start = time.monotonic()
                for m in MODELS:  # the consumer's read: never waits for the lock
                    df = read_snapshot(published, "training_set", [m])
                    assert df.equals(expected[m])
                slowest = max(slowest, time.monotonic() - start)
                reads += 1
                locked_reads += locked
                time.sleep(0.05)
            rc = writer.wait(timeout=60)
    assert rc == 0 and "WRITER DONE" in log.read_text(), log.read_text()[-3000:]
    assert locked_reads >= 3, (reads, locked_reads)  # the writers really held the warehouse meanwhile
    assert slowest < 2.0, slowest
