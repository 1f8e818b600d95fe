"""Issue 44 through the command line: every entry point under the cap, one pilot per home, ``plan`` refusing what
the run refuses, quiet interrupts, numbers at the edges and the five old failures of 2 December."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.helpers.cli import ENVDUELS, GOOD, build_export

PRICED = ("models:\n  - name: pricey\n    model: envduels-sim/oracle\n    input_cost_per_mtok: 1000\n"
          "    output_cost_per_mtok: 1000\n  - name: novice\n    model: envduels-sim/novice\n")


@pytest.fixture
def priced_env(tmp_path):
    registry = tmp_path / "priced.yaml"
    registry.write_text(PRICED)
    env = {**os.environ, "ENVDUELS_HOME": str(tmp_path / "home"), "ENVDUELS_REGISTRY": str(registry)}
    env.pop("DAGSTER_HOME", None)
    return env


@pytest.fixture
def cli(monkeypatch, capsys):
    """``envduels ARGS`` in this process (a subprocess costs ~10 s of imports on a loaded machine): (exit, out, err)."""
    from envduels_dagster import cli as module

    def run(env: dict, *args) -> subprocess.CompletedProcess:
        with monkeypatch.context() as m:
            for name in ("ENVDUELS_HOME", "ENVDUELS_REGISTRY", "ENVDUELS_BUDGET_USD", "DAGSTER_HOME"):
                if name in env:
                    m.setenv(name, env[name])
                else:
                    m.delenv(name, raising=False)
            try:
                code = module.main([str(a) for a in args])
            except SystemExit as exc:  # argparse: a usage error
                code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)
    return run


def _calls(home: Path) -> int:
    path = home / "cache" / "calls.sqlite"
    if not path.exists():
        return 0
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(*) FROM calls").fetchone()[0]


@pytest.mark.slow  # two episodes in the sandbox (~5 s on a loaded machine)
def test_play_spends_under_the_cap_and_records_what_it_paid(priced_env, tmp_path, cli):
    env_file = tmp_path / "parity.py"
    env_file.write_text(GOOD)
    home = Path(priced_env["ENVDUELS_HOME"])
    out = cli({**priced_env, "ENVDUELS_BUDGET_USD": "0.000001"}, "play", env_file, "--model", "pricey", "--json")
    # before issue 44: 10 priced calls past the cap, no ledger entry, exit 0
    assert out.returncode == 1, out.stderr
    rec = json.loads(out.stdout)
    assert rec["stop_reason"] == "stopped_at_budget" and rec["status"] == "incomplete"
    assert "the overall ENVDUELS_BUDGET_USD of $1e-06 would be passed" in rec["error"]
    assert "$0.0000 left" in rec["error"] and "raise ENVDUELS_BUDGET_USD and re-run" in rec["error"]
    assert _calls(home) == 0  # the refused call was never made
    # under a cap it can afford, play pays and the ledger records every call it made
    out = cli({**priced_env, "ENVDUELS_BUDGET_USD": "5"}, "play", env_file, "--model", "pricey", "--json")
    assert out.returncode == 0, out.stderr
    with sqlite3.connect(home / "cache" / "budget.sqlite") as conn:
        spent, held = conn.execute("SELECT count(*) FILTER (WHERE state = 'spent'), count(*) FILTER (WHERE state = "
                                   "'reserved') FROM spend").fetchone()
    assert spent == _calls(home) == json.loads(out.stdout)["model_calls"] > 0 and held == 0


def test_a_bad_overall_budget_is_refused_by_the_demo_before_anything_is_created(priced_env, cli):
    home = Path(priced_env["ENVDUELS_HOME"])
    t0 = time.perf_counter()
    out = cli({**priced_env, "ENVDUELS_BUDGET_USD": "lots"}, "demo", "--envs-per-author", "1", "--seeds", "1")
    # before issue 44: an instance and a failed run, exit 1 after 13-43 s, the variable unnamed
    assert out.returncode == 2, out.stderr
    assert out.stderr == ("envduels: error: budget: ENVDUELS_BUDGET_USD='lots' is not a number: give a positive amount "
                          "in US dollars (e.g. ENVDUELS_BUDGET_USD=25 or ENVDUELS_BUDGET_USD=2.50), or unset it for no "
                          "overall cap\n")
    assert not (home / "dagster").exists() and not (home / "warehouse.duckdb").exists()
    assert time.perf_counter() - t0 < 30


def _solver_only(tmp_path: Path) -> Path:
    path = tmp_path / "solvers.yaml"
    path.write_text("models:\n  - name: novice\n    model: envduels-sim/novice\n    roles: [solver]\n")
    return path


@pytest.mark.parametrize("case", ["rounds 21", "solver-only registry", "author-only registry"])
def test_plan_refuses_what_the_run_refuses(priced_env, tmp_path, case, cli):
    env, args = dict(priced_env), ["plan"]
    if case == "rounds 21":
        args += ["--rounds", "21"]
    elif case == "solver-only registry":
        env["ENVDUELS_REGISTRY"] = str(_solver_only(tmp_path))
    else:
        path = tmp_path / "authors.yaml"
        path.write_text("models:\n  - name: expert\n    model: envduels-sim/expert\n    roles: [author]\n")
        env["ENVDUELS_REGISTRY"] = str(path)
    out = cli(env, *args)
    assert out.returncode == 2, out.stdout  # before: a "0 pairs" plan (or 21 rounds) with exit 0
    assert out.stdout == "" and out.stderr.count("\n") == 1
    expected = {"rounds 21": "--rounds 21 is outside 0..20",
                "solver-only registry": "no model has the author role",
                "author-only registry": "no model has the solver role"}[case]
    assert expected in out.stderr
    assert not (Path(env["ENVDUELS_HOME"]) / "plans").exists()  # no plan kept


def test_plan_compare_warns_when_the_plan_was_made_for_other_sizes(priced_env, cli):
    import duckdb

    home = Path(priced_env["ENVDUELS_HOME"])
    planned = cli(priced_env, "plan", "--envs-per-author", "4", "--seeds", "2", "--rounds", "0")
    assert planned.returncode == 0, planned.stderr
    with duckdb.connect(str(home / "warehouse.duckdb")) as conn:  # the run was made at 2 environments, 3 seeds
        conn.execute("CREATE TABLE environments (author VARCHAR, round INTEGER, benchmark_seeds UBIGINT[])")
        conn.execute("INSERT INTO environments VALUES ('pricey', 0, [0, 1, 2]), ('pricey', 0, [0, 1, 2])")
    out = cli(priced_env, "plan", "--compare")
    assert out.returncode == 0, out.stderr
    assert ("warning: the plan was made for 4 environments per author, the warehouse's run used 2" in out.stderr
            and "(plan again with --envs-per-author 2)" in out.stderr)
    assert "warning: the plan was made for 2 seeds, the warehouse's run used 3" in out.stderr
    assert "hardening rounds" not in out.stderr  # the same: no warning
    same = cli(priced_env, "plan", "--envs-per-author", "2", "--seeds", "3", "--rounds", "0")
    assert same.returncode == 0
    assert "warning" not in cli(priced_env, "plan", "--compare").stderr


HOLD_PILOT_LOCK = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from envduels_dagster.cli.process_lock import exclusive
    with exclusive(Path(sys.argv[1]), "another pilot (envduels plan --pilot)"):
        print("holding", flush=True)
        time.sleep(600)
""")


@pytest.mark.slow  # a real pilot after the refusal (~5 s on a loaded machine)
def test_a_second_pilot_on_one_home_is_refused_before_it_pays_naming_the_first(priced_env, cli):
    home = Path(priced_env["ENVDUELS_HOME"])
    first = subprocess.Popen([sys.executable, "-c", HOLD_PILOT_LOCK, str(home / "plans" / "pilot.lock")],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "holding"
        out = cli(priced_env, "plan", "--pilot", "--yes", "--envs-per-author", "2")
    finally:
        first.kill()
        first.wait()
    assert out.returncode == 1, out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert line.startswith("envduels: error: another pilot (envduels plan --pilot) is already running on this home "
                           f"(process {first.pid}, started ")
    assert line.endswith("; wait for it to finish, or stop that process, and run again (run again with --debug for "
                         "the traceback)")
    assert "pilot.new" not in out.stdout + out.stderr
    assert _calls(home) == 0 and not (home / "plans" / "pilot.duckdb").exists()  # nothing paid, nothing kept
    # the lock died with its holder: the next pilot runs
    again = cli(priced_env, "plan", "--pilot", "--yes", "--envs-per-author", "2")
    assert again.returncode == 0, again.stderr
    assert (home / "plans" / "pilot.duckdb").exists() and not (home / "plans" / "pilot.new.duckdb").exists()


def _slow_server() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([ENVDUELS, "serve-sim", "--port", "0", "--latency-ms", "20000"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    base = proc.stdout.readline().split("http://", 1)[1].split()[0]
    return proc, "http://" + base.rstrip("/").removesuffix("/v1") + "/v1"


@pytest.mark.slow  # a pilot against a server that answers after 20 s, stopped once it waits (~5 s)
@pytest.mark.parametrize("sig", [signal.SIGTERM])  # Ctrl-C already ended it with 130
def test_stopping_the_pilot_is_exit_130_one_line_and_leaves_no_scratch_file(priced_env, tmp_path, sig):
    server, base = _slow_server()
    registry = tmp_path / "remote.yaml"
    registry.write_text(f"models:\n  - name: remote\n    model: openai/expert\n    api_base: {base}\n"
                        "    request_contract: true\n")
    env = {**priced_env, "ENVDUELS_REGISTRY": str(registry)}
    home = Path(env["ENVDUELS_HOME"])
    try:
        proc = subprocess.Popen([ENVDUELS, "plan", "--pilot", "--yes", "--envs-per-author", "1", "--seeds", "1"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("pilot:")  # priced and started: now waiting on the server
        time.sleep(2)
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        server.kill()
        server.wait()
    assert proc.returncode == 130, stderr  # before issue 44, SIGTERM: 143 and nothing said
    # one line for the interrupt, after the plan's own warnings (1 environment per author cannot name an author)
    assert [line for line in stderr.splitlines() if not line.startswith("warning: ")] == ["envduels: error: interrupted"]
    assert not (home / "plans" / "pilot.new.duckdb").exists()
    assert "pilot.new" not in stdout


def test_a_thread_ended_by_an_interrupt_prints_no_traceback_and_sigterm_is_ctrl_c():
    script = textwrap.dedent("""
        import sys, threading, time
        from envduels_dagster.cli.interrupts import quiet_interrupts
        def watcher():  # as Dagster's orphan watcher: a KeyboardInterrupt raised in a thread
            raise KeyboardInterrupt
        try:
            with quiet_interrupts():
                t = threading.Thread(target=watcher)
                t.start()
                t.join()
                print("ready", flush=True)
                time.sleep(60)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(130)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130 and stdout.strip() == "interrupted"
    assert stderr == ""  # without the helper: the thread's KeyboardInterrupt traceback, and SIGTERM's silent 143


def test_an_interrupt_raised_inside_a_garbage_collection_is_delivered_again_not_lost():
    """A signal handler that raises while Python runs a weakref callback (a GC in the middle of a step) had its
    interrupt "ignored": a traceback on stderr and the step ran on (CI, 5 Dec: an import stopped while waiting
    for a busy warehouse waited out its wait, then failed with the lock error and exit 1)."""
    script = textwrap.dedent("""
        import sys, time, weakref
        from envduels_dagster.cli.interrupts import quiet_interrupts
        class Thing:
            pass
        def callback(ref):  # as the handler's raise landing in sqlalchemy's weakref callback
            raise KeyboardInterrupt
        try:
            with quiet_interrupts():
                thing = Thing()
                ref = weakref.ref(thing, callback)
                del thing  # the callback runs here; its KeyboardInterrupt is unraisable
                for _ in range(50):
                    time.sleep(0.1)  # the step running on
                print("ran on", flush=True)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(130)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.strip()) == (130, "interrupted"), out.stdout + out.stderr
    assert out.stderr == ""  # before: "Exception ignored in: <function callback ...> Traceback ... KeyboardInterrupt"


# --------------------------------------------------------------------------- numbers at the edges, old failures

@pytest.mark.parametrize(("field", "value", "message"), [
    ("input_cost_per_mtok", "1e308", "Input should be less than or equal to 10000"),
    ("output_cost_per_mtok", "20000", "Input should be less than or equal to 10000"),
    ("requests_per_minute", ".inf", "Input should be a finite number"),
    ("budget_usd", "1e300", "Input should be less than or equal to 10000000"),
])
def test_prices_and_limits_are_finite_and_bounded(priced_env, tmp_path, field, value, message, cli):
    path = tmp_path / "edge.yaml"
    path.write_text(PRICED.replace("    input_cost_per_mtok: 1000\n", "") + f"    {field}: {value}\n")
    out = cli({**priced_env, "ENVDUELS_REGISTRY": str(path)}, "plan")
    assert out.returncode == 2, out.stderr  # before: 1e308 passed, and `plan` showed "$inf"
    assert f"entry #2 ('novice'): field '{field}': {message}" in out.stderr


def test_json_output_is_never_non_finite():
    from envduels_dagster.cli.envs import json_line

    line = json_line({"cost_usd": float("inf"), "nested": [float("nan"), 1.5], "n": 3})
    assert json.loads(line) == {"cost_usd": None, "nested": [None, 1.5], "n": 3}
    assert "Infinity" not in line and "NaN" not in line


def test_a_model_string_with_a_newline_is_refused(priced_env, tmp_path, cli):
    path = tmp_path / "newline.yaml"
    path.write_text('models:\n  - name: odd\n    model: "openai/gpt\\nx"\n    api_base: http://127.0.0.1:9/v1\n')
    out = cli({**priced_env, "ENVDUELS_REGISTRY": str(path)}, "models")
    assert out.returncode == 2 and "field 'model'" in out.stderr
    assert "must not contain spaces, newlines or control characters, got 'openai/gpt\\nx'" in out.stderr


@pytest.mark.parametrize("option", ["--latency-ms", "--timeout-fault-s", "--rpm"])
def test_serve_sim_refuses_an_infinite_delay_or_rate(option, capsys):
    from envduels_dagster import cli

    with pytest.raises(SystemExit) as exit_:
        cli.main(["serve-sim", "--port", "0", option, "inf"])
    assert exit_.value.code == 2  # before: accepted, and the server never answered
    assert f"{option} must be a finite number, got 'inf'" in capsys.readouterr().err


def test_max_turns_true_and_duplicate_ids_are_rejected_and_an_empty_author_is_refused(priced_env, tmp_path, cli):
    export = build_export(tmp_path / "export", {"p1": GOOD, "p2": GOOD})
    manifest = json.loads((export / "manifest.json").read_text())
    manifest["environments"][0]["max_turns"] = True
    (export / "manifest.json").write_text(json.dumps(manifest))
    out = cli(priced_env, "validate", export)
    assert out.returncode == 1 and "environment 'p1': max_turns must be an integer 1..200, got true" in out.stdout
    manifest["environments"][0]["max_turns"] = 2
    manifest["environments"][1]["id"] = "p1"  # two entries, one id
    (export / "manifest.json").write_text(json.dumps(manifest))
    out = cli(priced_env, "validate", export)
    assert out.returncode == 1, out.stdout  # before: both validated, exit 0
    assert "environments #1 and #2 share the id 'p1'; give each environment its own id" in out.stdout
    home = Path(priced_env["ENVDUELS_HOME"])
    imported = cli(priced_env, "import", export)
    assert imported.returncode == 2 and "share the id 'p1'" in imported.stderr
    manifest["environments"][1]["id"] = "p2"
    (export / "manifest.json").write_text(json.dumps(manifest))
    empty = cli(priced_env, "import", export, "--author", "")
    assert empty.returncode == 2, empty.stdout  # before: ignored, imported under the manifest's author
    assert "import name '' must match" in empty.stderr
    assert not (home / "dagster").exists() and not (home / "imports").exists()


def _sleeping_in_its_loop(pid: int, timeout_s: float = 20.0) -> None:
    """Wait until the process has started and sleeps (state S in /proc five looks running, 0.2 s apart): its
    imports are done and it waits in its loop, so a signal reaches the loop, not the interpreter's start."""
    deadline, calm = time.time() + timeout_s, 0
    time.sleep(0.5)
    while time.time() < deadline and calm < 5:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        calm = calm + 1 if state == "S" else 0
        time.sleep(0.2)


def test_ctrl_c_reaches_no_orphan_watcher_of_dagster_that_prints_a_traceback():
    """Dagster starts a watcher process per step in the terminal's process group; Ctrl-C reached it and it printed a
    KeyboardInterrupt traceback after the demo's "interrupted" (3 of 3 tries)."""
    from dagster._core.execution import compute_logs
    from dagster._core.execution.scripts import watch_orphans as dagster_watch_orphans

    from envduels_dagster.cli.interrupts import quiet_orphan_watchers

    def watcher_after_ctrl_c(script: str) -> tuple[bool, str]:
        tail = subprocess.Popen(["sleep", "60"])
        watcher = subprocess.Popen([sys.executable, script, str(os.getpid()),
                                    str(tail.pid)], stderr=subprocess.PIPE, text=True)
        _sleeping_in_its_loop(watcher.pid)
        watcher.send_signal(signal.SIGINT)
        try:  # a loaded machine may take a while to deliver it (CI saw Dagster's own alive 0.5 s after)
            watcher.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        alive = watcher.poll() is None
        watcher.kill()
        tail.kill()
        tail.wait()
        _, err = watcher.communicate(timeout=10)
        return alive, err

    # Dagster's own script by its module, not by compute_logs' attribute: an in-process command run earlier in
    # this test process (the CLI tests) has already pointed that attribute at the quiet copy
    original = compute_logs.watch_orphans
    try:
        alive, err = watcher_after_ctrl_c(str(dagster_watch_orphans.__file__))
        assert not alive and "KeyboardInterrupt" in err  # Dagster's own: what the user saw
        quiet_orphan_watchers()
        alive, err = watcher_after_ctrl_c(str(compute_logs.watch_orphans.__file__))
        assert alive and err == ""  # deaf to Ctrl-C: it still outlives its parent to stop the tail
    finally:
        compute_logs.watch_orphans = original


def test_the_quiet_watcher_still_stops_the_tail_when_its_parent_is_gone(tmp_path):
    from envduels_dagster.cli import interrupts

    script = Path(interrupts.__file__).with_name("quiet_watch_orphans.py")
    tail = subprocess.Popen(["sleep", "60"])
    # the parent: a shell that starts the watcher in the background and exits at once
    subprocess.run(["sh", "-c", f'"{sys.executable}" "{script}" $$ {tail.pid} & sleep 0.5'], check=True)
    try:
        assert tail.wait(timeout=10) == -signal.SIGTERM
    finally:
        tail.kill()


@pytest.mark.slow  # a real import run waiting on a warehouse another process holds, then stopped (~15-30 s)
@pytest.mark.parametrize("sig", [signal.SIGTERM])  # main: SIGTERM killed it (-15), nothing said
def test_stopping_an_import_that_waits_for_a_busy_warehouse_is_exit_130_and_one_line(priced_env, tmp_path, sig):
    home = Path(priced_env["ENVDUELS_HOME"])
    home.mkdir(parents=True)
    export = build_export(tmp_path / "export", {"p1": GOOD})
    path = home / "warehouse.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", f"import duckdb, time; c = duckdb.connect({str(path)!r}); "
                               "print('held', flush=True); time.sleep(600)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        proc = subprocess.Popen([ENVDUELS, "import", str(export)], env=priced_env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 120
        while time.time() < deadline and not (home / "dagster" / "history").exists():
            time.sleep(0.5)  # the import's run has started (its instance exists): it now waits for the warehouse
        time.sleep(3)
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 130, stderr

    assert stderr.endswith("envduels: error: interrupted\n") and "Traceback" not in stderr, stderr
