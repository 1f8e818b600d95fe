"""Training exports: contract, round trip through the EnvDuels importer, atomic `latest`, bad imports."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest

from envduels_dagster.api import latest_export_dir, load_gym_rows, load_training_set
from envduels_dagster.core.protocol import sha256_text
from envduels_dagster.core.training.export import ExportIntegrityError, ExportItem, verify_export, write_export
from envduels_dagster.core.training.format import ExportFormatError, load_export

SOURCE = textwrap.dedent('''
    class Pick:
        def __init__(self, max_turns=3):
            self.max_turns = max_turns
        def reset(self, seed):
            self.answer = str(seed % 3)
            return "Pick 0, 1 or 2.", {}
        def step(self, action):
            ok = self.answer in action
            return ("yes" if ok else "no"), float(ok), ok, False, {}
        def reference_actions(self, seed):
            return [str(seed % 3)]
''')


def item(env_id: str, hint: str = "It is the seed modulo three.") -> ExportItem:
    return ExportItem(env_id=env_id, author="novice", domain="search", class_name="Pick", max_turns=3,
                      source=SOURCE, source_sha256=sha256_text(SOURCE), hint=hint, seeds=[0, 1, 2],
                      observations={s: "Pick 0, 1 or 2." for s in (0, 1, 2)}, p_cold=0.0, p_hint=1.0, lift=1.0,
                      lift_lower=1.0, lift_upper=1.0)


def test_export_round_trips_through_the_envduels_importer(tmp_path):
    root = tmp_path / "exports" / "oracle"
    path = write_export(root, "oracle", [item("a.r0.0"), item("b.r0.1", "Try small numbers.")], "v1")
    assert (root / "latest").resolve() == path
    specs = load_export(path)
    assert [s.env_id for s in specs] == ["a.r0.0", "b.r0.1"]
    assert {s.source_sha256 for s in specs} == {sha256_text(SOURCE)}
    assert [s.hint for s in specs] == ["It is the seed modulo three.", "Try small numbers."]
    assert all(s.benchmark_seeds == [0, 1, 2] for s in specs)
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["format_version"] == 1 and manifest["environments"][0]["split"] == "train"
    rows = [json.loads(line) for line in (path / "train.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and rows[0]["messages"] == [{"role": "user", "content": "<envduels-reset>"}]
    # Relocatable: export_dir is relative to the export root, and the loader resolves it where the export is.
    assert rows[0]["env_config"] == {"name": "envduels", "export_dir": ".", "env_id": "a.r0.0", "seed": 0}
    assert rows[0]["export_version"] == "v1"
    assert load_gym_rows("oracle", home=tmp_path)[0]["env_config"]["export_dir"] == str(path)
    moved = tmp_path / "shipped"
    shutil.copytree(path, moved)
    assert load_gym_rows(export_dir=moved)[0]["env_config"]["export_dir"] == str(moved.resolve())
    assert verify_export(moved) and str(path) not in (moved / "train.jsonl").read_text()
    # Downstream loaders: pandas through the API, and DuckDB straight from the documented path.
    df = load_training_set("oracle", home=tmp_path)
    assert len(df) == 6 and set(df["env_id"]) == {"a.r0.0", "b.r0.1"}
    assert json.loads(df["prompt"][0])[1]["content"] == "Observation: Pick 0, 1 or 2."
    assert "Hint" not in df["prompt"][0]  # prompts are cold; the hint travels in its own column
    n = duckdb.sql(f"SELECT count(*) FROM '{tmp_path}/exports/oracle/latest/train.parquet'").fetchall()[0][0]
    assert n == 6


def test_new_version_switches_latest_and_keeps_the_old_one(tmp_path):
    root = tmp_path / "exports" / "novice"
    first = write_export(root, "novice", [item("a")], "v1")
    second = write_export(root, "novice", [item("a"), item("b")], "v2")
    assert latest_export_dir("novice", home=tmp_path) == second
    assert verify_export(first) and len(load_export(first)) == 1 and len(load_export(second)) == 2
    with pytest.raises(ExportIntegrityError, match="already exists"):
        write_export(root, "novice", [item("c")], "v2")


def test_tampered_export_fails_verification_with_the_file_named(tmp_path):
    path = write_export(tmp_path / "x", "x", [item("a")], "v1")
    (path / "environments" / "a" / "env.py").write_text(SOURCE + "\n# edited\n")
    with pytest.raises(ExportIntegrityError, match=r"environments/a/env.py does not match its sha256"):
        verify_export(path)
    (path / "stray.txt").write_text("x")
    with pytest.raises(ExportIntegrityError, match="not listed in SHA256SUMS: stray.txt"):
        verify_export(path)


def test_source_hash_mismatch_is_refused_before_anything_is_published(tmp_path):
    bad = item("a")
    bad.source_sha256 = "0" * 64
    root = tmp_path / "exports" / "l"
    with pytest.raises(ExportIntegrityError, match="a: source does not match its recorded sha256"):
        write_export(root, "l", [bad], "v1")
    assert not (root / "latest").exists() and not (root / "v1").exists()


KILL_SCRIPT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from tests.core.training.test_training_export import item
    from envduels_dagster.core.training.export import write_export
    root = Path(sys.argv[1])
    write_export(root, "l", [item(f"e{i}") for i in range(50)], "v2", on_file=lambda p: time.sleep(0.02))
""")


def test_killed_export_never_moves_latest(tmp_path):
    root = tmp_path / "exports" / "l"
    first = write_export(root, "l", [item("a")], "v1")
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(root)], env={**os.environ, "PYTHONPATH": os.getcwd()})
    deadline = time.time() + 30
    while time.time() < deadline and not list(root.glob(".tmp-v2/environments/*")):
        time.sleep(0.01)
    time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (root / "latest").resolve() == first  # readers still see the complete first export
    assert not (root / "v2").exists() and list(root.glob(".tmp-v2"))  # the partial one is hidden
    verify_export(first)
    third = write_export(root, "l", [item("a"), item("b")], "v3")  # the next export cleans up
    assert not list(root.glob(".tmp-*")) and (root / "latest").resolve() == third


def write_manifest(root: Path, entry_overrides: dict, privileged: dict | None = None) -> None:
    (root / "envs").mkdir(parents=True)
    (root / "envs" / "pick.py").write_text(SOURCE)
    (root / "envs" / "meta.json").write_text(json.dumps({"benchmark_seeds": [0, 1]}))
    (root / "envs" / "priv.json").write_text(json.dumps(privileged or {"environment_id": "p", "hints": {"hint": "h"}}))
    entry = {"id": "p", "source": "envs/pick.py", "source_sha256": sha256_text(SOURCE), "class_name": "Pick",
             "max_turns": 3, "domain": "search", "split": "train", "author": "ext", "metadata": "envs/meta.json",
             "privileged": "envs/priv.json", **entry_overrides}
    (root / "manifest.json").write_text(json.dumps({"format_version": 1, "environments": [entry]}))


@pytest.mark.slow  # about a second or more (--durations, 1 Dec 2026): kept out of the inner loop
@pytest.mark.parametrize("overrides, privileged, message", [
    ({"source": "../outside.py"}, None, "escapes the export root"),
    ({"source_sha256": "f" * 64}, None, "source_sha256 does not match"),
    ({}, {"environment_id": "other", "hints": {"hint": "h"}}, "privileged file must hold its environment_id"),
    ({}, {"environment_id": "p", "hints": "not a mapping"}, "privileged file must hold its environment_id"),
])
def test_bad_imports_are_rejected_and_nothing_is_written(tmp_path, overrides, privileged, message, envduels_home):
    root = tmp_path / "export"
    write_manifest(root, overrides, privileged)
    (tmp_path / "outside.py").write_text(SOURCE)
    with pytest.raises(ExportFormatError, match=message):
        load_export(root)
    out = subprocess.run([sys.executable, "-m", "envduels_dagster.cli", "import", str(root), "--json"],
                         capture_output=True, text=True, env={**os.environ, "ENVDUELS_HOME": str(envduels_home)})
    assert out.returncode == 2 and message in out.stderr
    warehouse = envduels_home / "warehouse.duckdb"
    if warehouse.exists():
        with duckdb.connect(str(warehouse), read_only=True) as conn:
            tables = {t for (t,) in conn.execute("SHOW TABLES").fetchall()}
            if "environments" in tables:
                assert conn.execute("SELECT count(*) FROM environments").fetchone()[0] == 0


@pytest.mark.slow  # a few seconds or more (measured with --durations, loaded 2-core machine)
def test_good_import_validates_and_lands_in_the_warehouse(tmp_path, envduels_home):
    root = tmp_path / "export"
    write_manifest(root, {})
    out = subprocess.run([sys.executable, "-m", "envduels_dagster.cli", "import", str(root), "--json"],
                         capture_output=True, text=True, env={**os.environ, "ENVDUELS_HOME": str(envduels_home)})
    assert out.returncode == 0, out.stderr
    report = [json.loads(line) for line in out.stdout.splitlines()]
    # Through a Dagster run (tests/flows/test_imports.py): the manifest's author becomes partition import:ext.
    assert report == [{"env_id": "import:ext.p", "author": "import:ext", "valid": True, "reason": None}]
    with duckdb.connect(str(envduels_home / "warehouse.duckdb"), read_only=True) as conn:
        row = conn.execute("SELECT env_id, author, hint, valid, benchmark_seeds FROM environments").fetchall()
    assert row == [("import:ext.p", "import:ext", "h", True, [0, 1])]


@pytest.mark.slow  # about a second or more (--durations, 1 Dec 2026): kept out of the inner loop
def test_lift_learning_study_trains_on_hints_and_measures_gain_on_held_out_games():
    """A learner trained on structural hints gains on held-out games of that structure; vague hints teach nothing."""
    import asyncio

    from envduels_dagster.core.protocol import EnvironmentSpec
    from envduels_dagster.core.studies.learning import correlate, study_learner
    from envduels_dagster.sim.author import VAGUE_HINT
    from envduels_dagster.sim.families import GUESS, render
    from envduels_dagster.sim.profiles import get_profile
    from envduels_dagster.sim.training import ProfileGateway, sim_trainer

    def guess_env(author, salt, hint):
        src = render(GUESS, **{"class": "G"}, rng=f"random.Random(seed * 1000003 + {salt})", turns=5,
                     limit=400, step=10, offset="")
        return EnvironmentSpec(env_id=f"{author}.{salt}", author=author, class_name="G", max_turns=5, source=src,
                               hint=hint, valid=True, benchmark_seeds=list(range(8)))

    structural = "The secret is always a multiple of 10."
    train = {"good": [guess_env("good", 1, structural)], "vague": [guess_env("vague", 2, VAGUE_HINT)]}
    heldout = {a: [guess_env(a, 10 + i, "") for i in range(3)] for a in ("good", "vague")}
    base = ProfileGateway(get_profile("expert"))
    df = asyncio.run(study_learner("expert", base, sim_trainer("expert"), {"good": 0.5, "vague": 0.0}, train,
                                   heldout))
    gains = dict(zip(df["author"], df["gain"]))
    assert gains["good"] > 0.2 and gains["vague"] == 0.0
    again = asyncio.run(study_learner("expert", base, sim_trainer("expert"), {"good": 0.5, "vague": 0.0}, train,
                                      heldout))
    assert again.equals(df)  # the study is deterministic: same inputs, same table
    rho, p, n = correlate(df)
    assert n == 2 and rho != rho  # two points give no rank correlation (nan), never a fake one


def test_an_export_that_does_not_match_its_training_set_is_never_published(tmp_path):
    root = tmp_path / "exports" / "l"
    first = write_export(root, "l", [item("a")], "v1", expected={"a": item("a").source_sha256})
    with pytest.raises(ExportIntegrityError, match=r"does not match its training set, not published: "
                                                   r"missing from the export: b"):
        write_export(root, "l", [item("a")], "v2", expected={"a": item("a").source_sha256, "b": "f" * 64})
    assert (root / "latest").resolve() == first.resolve()
    # no staged leftovers, no v2 (.export.lock: the learner's export lock, issue 33)
    assert sorted(p.name for p in root.iterdir()) == [".export.lock", "latest", "v1"]


CONCURRENT_SCRIPT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from tests.core.training.test_training_export import item
    from envduels_dagster.core.training.export import write_export
    root, version = Path(sys.argv[1]), sys.argv[2]
    write_export(root, "l", [item(f"e{i}") for i in range(20)], version, on_file=lambda p: time.sleep(0.01))
    print("published", version)
""")


def test_two_exports_of_one_learner_at_once_both_publish(tmp_path):
    """Issue 33: each export used to sweep every .tmp-* of the learner, the other's export in progress too."""
    root = tmp_path / "exports" / "l"
    stale = root / ".tmp-crashed"  # a leftover of an export that died: still swept
    stale.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    procs = [subprocess.Popen([sys.executable, "-c", CONCURRENT_SCRIPT, str(root), v], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for v in ("va", "vb")]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    assert sorted(out.split()[-1] for out, _ in outs) == ["va", "vb"]
    for version in ("va", "vb"):
        assert len(verify_export(root / version).environments) == 20
    assert (root / "latest").resolve() in {root / "va", root / "vb"}
    assert not list(root.glob(".tmp-*"))  # the crashed leftover is gone, and neither export left its own


def test_a_failed_export_removes_only_its_own_temporary_directory(tmp_path):
    root = tmp_path / "exports" / "l"
    first = write_export(root, "l", [item("a")], "v1")
    with pytest.raises(ExportIntegrityError, match="does not match its training set"):
        write_export(root, "l", [item("a")], "v2", expected={"b": sha256_text(SOURCE)})
    assert not list(root.glob(".tmp-*")) and not (root / "v2").exists()
    assert (root / "latest").resolve() == first
