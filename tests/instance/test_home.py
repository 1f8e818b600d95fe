"""An instance home prepared before issue 47 keeps working: its dagster.yaml names the plugins by their old
paths (``envduels_dagster.run_launcher``, ``.run_coordinator``, ``.instance_storage``). Those still load, with a
real instance launching a real run; and preparing the home (``demo``, ``run``, ``import``, ``ui``) rewrites them
to the new paths once, whole, and says so. The old files are copied verbatim from main before the move
(tests/fixtures/instance_before_issue47/).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

BEFORE = REPO / "tests" / "fixtures" / "instance_before_issue47"
NEW_PATHS = {"envduels_dagster.instance_storage": "envduels_dagster.instance.storage",
             "envduels_dagster.run_coordinator": "envduels_dagster.instance.run_coordinator",
             "envduels_dagster.run_launcher": "envduels_dagster.instance.run_launcher"}


def old_home(tmp_path: Path, template: str = "dagster.yaml") -> Path:
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_bytes((BEFORE / template).read_bytes())
    return home


def expected_upgrade(text: str) -> str:
    for old, new in NEW_PATHS.items():
        text = text.replace(f"module: {old}\n", f"module: {new}\n")
    return text


@pytest.mark.parametrize("template, moved", [
    ("dagster.yaml", ["envduels_dagster.instance_storage", "envduels_dagster.run_coordinator",
                      "envduels_dagster.run_launcher"]),
    ("dagster-postgres.yaml", ["envduels_dagster.run_coordinator", "envduels_dagster.run_launcher"])])
def test_preparing_an_old_home_upgrades_its_module_paths_once_and_says_so(tmp_path, monkeypatch, capsys, template,
                                                                          moved):
    from envduels_dagster.instance.home import prepare_instance_home

    home = old_home(tmp_path, template)
    before = (home / "dagster.yaml").read_text()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    assert prepare_instance_home() == home
    after = (home / "dagster.yaml").read_text()
    assert after == expected_upgrade(before) != before  # the module lines only; comments and settings unchanged
    assert "module: envduels_dagster.run_launcher\n" not in after
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"envduels: {home / 'dagster.yaml'}: upgraded the module paths ")
    assert all(f"{old} -> {NEW_PATHS[old]}" in line for old in moved)
    assert sorted(p.name for p in home.iterdir()) == ["dagster.yaml"]  # no temporary file left behind
    prepare_instance_home()  # a second time: nothing to do, nothing said
    assert (home / "dagster.yaml").read_text() == after and capsys.readouterr().err == ""


def test_a_new_home_gets_the_current_template_which_names_no_old_path(tmp_path, monkeypatch, capsys):
    from envduels_dagster.instance.home import prepare_instance_home

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.delenv("ENVDUELS_STORAGE", raising=False)
    home = prepare_instance_home()
    text = (home / "dagster.yaml").read_text()
    assert text == (REPO / "dagster.yaml").read_text()
    assert not any(f"module: {old}\n" in text for old in NEW_PATHS) and capsys.readouterr().err == ""


def test_a_home_whose_file_cannot_be_rewritten_keeps_it_whole_and_says_what_to_do(tmp_path):
    """A real write failure (a file size limit, as a full quota: root ignores permissions): the file is left as
    it was, no temporary file stays, the command goes on (the old paths still load) and the line says what to do."""
    home = old_home(tmp_path)
    before = (home / "dagster.yaml").read_bytes()
    script = ("import resource, signal, sys\n"
              "from pathlib import Path\n"
              "from envduels_dagster.instance.home import upgrade_module_paths\n"
              "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
              "resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))\n"
              "found = upgrade_module_paths(Path(sys.argv[1]))\n"
              "print(','.join(found))\n")
    out = subprocess.run([sys.executable, "-c", script, str(home / "dagster.yaml")], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ("envduels_dagster.instance_storage,envduels_dagster.run_coordinator,"
                                  "envduels_dagster.run_launcher")
    (line,) = out.stderr.splitlines()
    assert line.startswith(f"envduels: {home / 'dagster.yaml'}: names the old module paths envduels_dagster.")
    assert "could not be rewritten ([Errno 27] File too large)" in line
    assert line.endswith("they still load, but make the file writable or replace each with its "
                         "envduels_dagster.instance.* path")
    assert (home / "dagster.yaml").read_bytes() == before
    assert sorted(p.name for p in home.iterdir()) == ["dagster.yaml"]


@pytest.mark.slow  # a code server and a run worker start (~15-30 s on a loaded 2-core machine)
def test_a_dagster_yaml_of_before_the_move_loads_and_launches_a_run(tmp_path):
    """The old file, not prepared (as ``dagster dev`` reads it): its coordinator queues a run in one process, its
    launcher launches it in this one, the run's worker (a third process) writes through its storage."""
    import dagster as dg
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget

    from envduels_dagster.instance.run_coordinator import ProviderTaggedRunCoordinator
    from envduels_dagster.instance.run_launcher import HOST_TAG, WorkerCheckingRunLauncher
    from envduels_dagster.instance.storage import PooledSqliteEventLogStorage
    from tests.helpers.daemon import BIN

    home = old_home(tmp_path)
    before = (home / "dagster.yaml").read_bytes()
    fixture = REPO / "tests" / "fixtures" / "monitoring"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVDUELS_", "DAGSTER_"))}
    env.update(DAGSTER_HOME=str(home), ENVDUELS_HOME=str(tmp_path / "data"),
               PYTHONPATH=os.pathsep.join([str(fixture), str(REPO)]))
    launch = subprocess.run([str(BIN / "dagster"), "job", "launch", "-w", str(fixture / "workspace.yaml"),
                             "-j", "quick_job"], cwd=fixture, env=env, capture_output=True, text=True, timeout=300)
    assert launch.returncode == 0, launch.stderr[-2000:]

    old_env = {k: os.environ.get(k) for k in ("DAGSTER_HOME", "PYTHONPATH")}
    os.environ.update(DAGSTER_HOME=str(home), PYTHONPATH=env["PYTHONPATH"])
    try:
        with dg.DagsterInstance.get() as instance:
            loaded = {"storage": instance.get_ref().storage_data, "run_coordinator": instance.run_coordinator.inst_data,
                      "run_launcher": instance.run_launcher.inst_data}
            assert isinstance(instance.event_log_storage, PooledSqliteEventLogStorage)
            assert isinstance(instance.run_coordinator, ProviderTaggedRunCoordinator)
            assert isinstance(instance.run_launcher, WorkerCheckingRunLauncher)
            assert {k: v.module_name for k, v in loaded.items()} == {
                "storage": "envduels_dagster.instance_storage", "run_coordinator": "envduels_dagster.run_coordinator",
                "run_launcher": "envduels_dagster.run_launcher"}  # loaded by the old paths
            (record,) = instance.get_run_records()
            run_id = record.dagster_run.run_id
            assert record.dagster_run.status == dg.DagsterRunStatus.QUEUED  # through the old coordinator
            with WorkspaceProcessContext(instance, WorkspaceFileTarget(paths=[str(fixture / "workspace.yaml")])) \
                    as workspace:
                instance.launch_run(run_id, workspace.create_request_context())
                deadline = time.monotonic() + 240
                while instance.get_run_by_id(run_id).status not in (dg.DagsterRunStatus.SUCCESS,
                                                                    dg.DagsterRunStatus.FAILURE):
                    assert time.monotonic() < deadline, "the launched run did not finish within 240 s"
                    time.sleep(0.5)
            run = instance.get_run_by_id(run_id)
            assert run.status == dg.DagsterRunStatus.SUCCESS, [e.user_message for e in instance.all_logs(run_id)][-5:]
            assert run.tags.get(HOST_TAG)  # the project's launcher launched it (it records the machine)
    finally:
        for key, value in old_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert (home / "dagster.yaml").read_bytes() == before  # loading never rewrites the file
