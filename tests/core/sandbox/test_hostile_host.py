"""Hostile environments against the host itself (issue 20): memory outside every rlimit,
orphans, a view of the host, orchestrator amplification, false verdicts.

Each test asserts the effect *on the host* -- its memory, its process table, its
listeners, the orchestrator's own peak memory and CPU, what play shows -- measured from
this side, not only the reason the sandbox gives. The ``world`` fixture of
``test_hostile`` checks after each test that nothing outlived the run.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from envduels_dagster.core.sandbox import SandboxedEnv, SandboxError, SandboxLimits
from tests.helpers.hostile import (  # noqa: F401 - world is a fixture
    LIMITS,
    ROOMY,
    game,
    processes,
    rejected,
    world,
)
from tests.helpers.paths import REPO

pytestmark = pytest.mark.skipif(os.getuid() != 0, reason="the hostile suite needs root")

MB = 1024 * 1024


def meminfo(field: str) -> int:
    """A /proc/meminfo field of the host, in bytes."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


async def held_while_alive(source: str, fields: tuple[str, ...]) -> tuple[str, dict[str, int]]:
    """Run reset() (the attack, which keeps what it took) and measure the host while the worker lives."""
    before = {f: meminfo(f) for f in fields}
    async with SandboxedEnv(source, "Game", 6, ROOMY) as env:
        try:
            await env.reset(0)
            report = "returned"
        except SandboxError as exc:
            report = exc.message
        delta = {f: meminfo(f) - before[f] for f in fields}
    return report, delta


# The attack of issue 20: attach, fill and detach segment after segment, so that RLIMIT_AS
# (which counts only what is attached) never sees more than one.
SHM_ATTACK = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
made = 0
for i in range(32):
    shmid = libc.shmget(0, 4 << 20, 0o1000 | 0o600)
    if shmid < 0:
        break
    addr = libc.shmat(shmid, None, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        break
    ctypes.memset(addr, 1, 4 << 20)
    libc.shmdt(ctypes.c_void_p(addr))
    made += 4
live = len(open("/proc/sysvipc/shm").read().splitlines()) - 1
raise RuntimeError(f"filled={made}MB live={live}")
"""


def test_sysv_shared_memory_is_capped_inside_the_workers_ipc_namespace(world):
    report, delta = asyncio.run(held_while_alive(game(reset=SHM_ATTACK), ("Shmem",)))
    # shm_rmid_forced destroys each segment at its last detach (shmall caps what is attached
    # at ipc_mb = 8 MB): the 128 MB it filled one segment at a time are not held.
    assert report.endswith("filled=128MB live=0"), report
    assert delta["Shmem"] < 48 * MB, f"the host's shared memory grew by {delta['Shmem'] // MB} MB ({report})"


MSG_ATTACK = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(8 + 8000)
buf[0] = 1
queued = queues = 0
for q in range(4096):
    qid = libc.msgget(0, 0o1000 | 0o600)
    if qid < 0:
        break
    queues += 1
    while libc.msgsnd(qid, buf, 8000, 0o4000) == 0:  # IPC_NOWAIT
        queued += 8000
raise RuntimeError(f"queues={queues} queued={queued // 1024}KB")
"""


def test_sysv_message_queues_are_capped_inside_the_workers_ipc_namespace(world):
    report, delta = asyncio.run(held_while_alive(game(reset=MSG_ATTACK), ("SUnreclaim", "Slab")))
    # msgmni=4 queues of msgmnb=16 KB (two 8000-byte messages each): 62 KB of kernel memory at most.
    assert report.endswith("queues=4 queued=62KB"), report
    assert delta["SUnreclaim"] < 32 * MB, f"unreclaimable slab grew by {delta['SUnreclaim'] // MB} MB"


INODE_ATTACK = """
import os
made = 0
try:
    for i in range(420_000):
        os.mkdir(f"d{i}")
        made += 1
except OSError as exc:
    raise RuntimeError(f"dirs={made} {type(exc).__name__}") from None
raise RuntimeError(f"dirs={made}")
"""


def test_empty_directories_in_the_workdir_are_capped_by_its_inode_count(world):
    report, delta = asyncio.run(held_while_alive(game(reset=INODE_ATTACK), ("SUnreclaim",)))
    # nr_inodes=workdir_inodes (2048, one is the root directory itself): ENOSPC.
    assert report == "reset() raised RuntimeError: dirs=2047 OSError", report
    assert delta["SUnreclaim"] < 32 * MB, f"unreclaimable slab grew by {delta['SUnreclaim'] // MB} MB"


# --------------------------------------------------------------------------- orphans

ORCHESTRATOR = r"""
import asyncio, sys
from envduels_dagster.core.sandbox import SandboxedEnv, SandboxLimits

async def main():
    limits = SandboxLimits(step_timeout_s=600, load_timeout_s=30, fork_server=FORK_SERVER)
    env = SandboxedEnv(sys.stdin.read(), "Game", 6, limits)
    await env.start()
    obs, _ = await env.reset(0)
    print(env.uid, env._workdir, obs, flush=True)
    await env.step("spin")  # never answers: the orchestrator is killed meanwhile

asyncio.run(main())
"""

# Clears its parent-death signal (the attack of issue 20), holds 64 MB, then spins.
ORPHAN = game(init="""
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG 0
self.cleared = "cleared" if rc == 0 else errno.errorcode[ctypes.get_errno()]
self.ballast = bytearray(64 << 20)
""", reset="""
return f"pdeathsig={self.cleared}", {}
""", step="""
while True:
    pass
""")


def by_uid(uid: int) -> list[int]:
    return [pid for pid, _, u, _ in processes() if u == uid]


@pytest.mark.slow
@pytest.mark.parametrize("fork_server", [True, False], ids=["fork-server", "exec"])
def test_no_worker_survives_sigkill_of_the_orchestrators_process_group(world, fork_server):
    script = ORCHESTRATOR.replace("FORK_SERVER", str(fork_server))
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            start_new_session=True, cwd=REPO, env={**os.environ, "TMPDIR": world.tempdir},
                            text=True)
    proc.stdin.write(ORPHAN)
    proc.stdin.close()
    uid_text, workdir, obs = proc.stdout.readline().split()
    uid = int(uid_text)
    assert obs == "pdeathsig=EPERM"  # seccomp refuses to change the parent-death signal
    deadline = time.monotonic() + 5
    while not by_uid(uid) and time.monotonic() < deadline:  # the worker spins in step()
        time.sleep(0.02)
    assert by_uid(uid), "the worker was not running before the kill"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 5
    while (by_uid(uid) or (fork_server and os.path.exists(workdir))) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert by_uid(uid) == [], "a worker outlived its orchestrator"
    if fork_server:  # the fork server removed it before exiting
        assert not os.path.exists(workdir)
    else:  # nobody was left to remove it: the next sandbox sweeps it
        assert os.path.exists(workdir)
    # The next orchestrator process sweeps it when it starts its first sandbox.
    nxt = ORCHESTRATOR.replace("FORK_SERVER", "True").replace('await env.step("spin")', "await env.close()")
    subprocess.run([sys.executable, "-c", nxt], input=game(), stdout=subprocess.DEVNULL, check=True, cwd=REPO,
                   env={**os.environ, "TMPDIR": world.tempdir}, text=True, timeout=60)
    assert not os.path.exists(workdir), "a stale working directory was not swept"
    asyncio.run(_one_benign_sandbox())


async def _one_benign_sandbox() -> None:
    async with SandboxedEnv(game(), "Game", 6, LIMITS) as env:
        await env.reset(0)


def test_stale_working_directories_are_swept_and_live_ones_kept(world):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = Path(world.tempdir) / f"envduels-sbx-{dead.pid}-abcdefgh"
    live = Path(world.tempdir) / f"envduels-sbx-{os.getppid()}-abcdefgh"  # pytest's parent lives
    for path in (stale, live):
        (path / "sub").mkdir(parents=True)
    sweep_stale = __import__("envduels_dagster.core.sandbox.workdirs", fromlist=["x"]).sweep_stale
    assert sweep_stale(world.tempdir) == [str(stale)]
    asyncio.run(_one_benign_sandbox())
    assert not stale.exists() and live.exists()
    shutil.rmtree(live)


# --------------------------------------------------------------------------- seccomp: clone flags and sockets

CLONE_PROBE = """
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = []
for name, flags in (("newuser", 0x10000000 | 17), ("newpid", 0x20000000 | 17), ("newnet", 0x40000000 | 17),
                    ("plain", 17)):
    rc = libc.syscall(56, flags, 0, 0, 0, 0)  # clone(flags | SIGCHLD)
    out.append(f"{name}={'CHILD' if rc >= 0 else errno.errorcode[ctypes.get_errno()]}")
args = (ctypes.c_uint64 * 11)(0x10000000, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0)
rc = libc.syscall(435, args, ctypes.sizeof(args))  # clone3 with CLONE_NEWUSER
out.append(f"clone3={'CHILD' if rc >= 0 else errno.errorcode[ctypes.get_errno()]}")
raise RuntimeError(" ".join(out))
"""


def test_clone_with_namespace_flags_and_clone3_are_refused_by_seccomp(world):
    reason = rejected(game(reset=CLONE_PROBE))
    # Namespace flags: EPERM from the filter; a plain clone still meets RLIMIT_NPROC=0 (EAGAIN);
    # clone3 (flags out of the filter's sight): ENOSYS, as container runtimes answer.
    assert reason == ("crash during reset(seed=0): reset() raised RuntimeError: "
                      "newuser=EPERM newpid=EPERM newnet=EPERM plain=EAGAIN clone3=ENOSYS")


class UnixListener:
    """A world-writable unix socket on the host, outside every scratch directory."""

    def __enter__(self) -> UnixListener:
        import socket
        import tempfile

        self.dir = tempfile.mkdtemp(prefix="envduels-unix-", dir="/run")
        os.chmod(self.dir, 0o755)
        self.path = os.path.join(self.dir, "bus")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        os.chmod(self.path, 0o777)
        self.sock.listen(8)
        self.sock.setblocking(False)
        return self

    def contacts(self) -> int:
        n = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except BlockingIOError:
                return n
            conn.close()
            n += 1

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


UNIX_PROBE = """
import socket
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(PATH)
    result = "CONNECTED"
except OSError as exc:
    result = type(exc).__name__ + ":" + str(exc.errno)
pair = socket.socketpair()  # unnamed, reaches nobody: asyncio's event loop needs it
raise RuntimeError(f"unix={result} socketpair={len(pair)}")
"""


@pytest.mark.parametrize(("limits", "result", "contacts"), [
    (SandboxLimits(step_timeout_s=2.0), "unix=PermissionError:1", 0),  # seccomp: no AF_UNIX socket
    (SandboxLimits(step_timeout_s=2.0, seccomp=False), "unix=FileNotFoundError:2", 0),  # narrowed root
    (SandboxLimits(step_timeout_s=2.0, seccomp=False, narrow_filesystem=False), "unix=CONNECTED", 1),
], ids=["default", "narrowed-root-alone", "positive-control-neither"])
def test_a_world_writable_host_unix_socket_is_never_contacted(world, limits, result, contacts):
    with UnixListener() as lst:
        reason = rejected(game(reset=UNIX_PROBE.replace("PATH", repr(lst.path))), limits)
        assert lst.contacts() == contacts, "contacts of the host unix socket"
    assert reason.endswith(f"{result} socketpair=2"), reason


# --------------------------------------------------------------------------- verdicts that play confirms


class ReferencePlayer:
    """A solver that plays the reference answer of the guessing game (seed % 4) at its first turn."""

    async def chat(self, solver: str, messages: list[dict], seed: int | None = None, **_: object):
        from envduels_dagster.core.models import ChatResponse

        return ChatResponse(text=f"\\boxed{{{seed % 4}}}")


# reference_actions() flips class-level state that step() then relies on: its replay in the
# same worker wins, while a solver playing the very same actions in play never can.
SELF_FULFILLING = game(prelude="SOLVED = []", step="""
if not SOLVED:
    self.turn += 1
    return "Wrong.", 0.0, False, self.turn >= self.max_turns, {}
""", reference="SOLVED.append(seed)")


@pytest.mark.parametrize(("source", "verdict", "outcome"), [
    (game(), "proven", "success"),
    (SELF_FULFILLING, "failed", "failure"),
], ids=["control-benign", "class-level-state"])
def test_the_verdict_equals_what_play_shows(world, source, verdict, outcome):
    from envduels_dagster.core.authoring.validation import validate_environment
    from envduels_dagster.core.play.episode import PlayConfig, play_episode
    from tests.helpers.hostile import spec

    result = asyncio.run(validate_environment(spec(source), LIMITS))
    assert result.winnability == verdict, result.reject_reason
    if verdict == "failed":
        assert result.reject_reason == ("reference solution does not win seed 0 within max_turns=6 "
                                        "(1 reference actions)")
    for seed in spec(source).benchmark_seeds:
        rec = asyncio.run(play_episode(ReferencePlayer(), "reference", spec(source), seed, "cold", PlayConfig(limits=LIMITS)))
        assert rec.status == outcome, rec


# --------------------------------------------------------------------------- no view of the host

PROC_SNOOP = """
import os
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
tables = ""
for pid in ["self"] + pids:
    for name in ("tcp", "tcp6"):
        try:
            tables += open(f"/proc/{pid}/net/{name}").read()
        except OSError:
            pass
raise RuntimeError(f"pids={pids} sees_port={PORT_HEX in tables}")
"""


def test_proc_shows_only_the_worker_and_no_host_socket(world):
    import socket

    with socket.socket() as host_listener:  # a host port that /proc/<pid>/net/tcp would list
        host_listener.bind(("127.0.0.1", 0))
        host_listener.listen(1)
        port_hex = f":{host_listener.getsockname()[1]:04X} "
        assert port_hex in Path("/proc/net/tcp").read_text()  # visible on the host
        reason = rejected(game(reset=PROC_SNOOP.replace("PORT_HEX", repr(port_hex))))
    # Its own pid namespace, mounted hidepid: only the worker (2); not even its root init (1), which
    # lives in the host's network namespace (its /proc/1/net/tcp listed this port: measured).
    assert reason == "crash during reset(seed=0): reset() raised RuntimeError: pids=[2] sees_port=False"


# --------------------------------------------------------------------------- without root

NOBODY_ORCHESTRATOR = r"""
import asyncio, json, sys
sys.path.insert(0, REPO)
from envduels_dagster.core.sandbox import SandboxedEnv, SandboxError, SandboxLimits

def shmem():
    for line in open("/proc/meminfo"):
        if line.startswith("Shmem:"):
            return int(line.split()[1]) * 1024

async def main():
    out = {}
    for name, limits in (("fork", SandboxLimits(step_timeout_s=15)),
                         ("exec", SandboxLimits(step_timeout_s=15, fork_server=False))):
        before = shmem()
        async with SandboxedEnv(sys.stdin.read() if not out else SOURCE[0], "Game", 6, limits) as env:
            SOURCE[:] = [env.source]
            try:
                await env.reset(0)
            except SandboxError as exc:
                message = exc.message
            out[name] = {"applied": env.applied, "message": message, "shmem_delta": shmem() - before}
    print(json.dumps(out))

SOURCE = []
asyncio.run(main())
"""

SYSCTL_RAISE = """
try:
    open("/proc/sys/kernel/shmall", "w").write("99999999")
    raised = "RAISED"
except OSError as exc:
    raised = type(exc).__name__
"""


@pytest.fixture
def package_for_nobody(world):
    """A copy of the package that ``nobody`` can import, wherever the checkout lives (issue 36).

    A clone in a private directory (``mktemp -d`` is 0700, so are many homes) is unreadable to
    another user; the test must not depend on where it was cloned. The copy sits beside the world's
    temporary directory (whose emptiness the world checks), in a 0755 directory of its own."""
    root = Path(tempfile.mkdtemp(prefix="envduels-for-nobody-", dir=Path(world.tempdir).parent))
    try:
        shutil.copytree(REPO / "envduels_dagster", root / "envduels_dagster",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield str(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.skipif(not Path("/usr/bin/python3.11").exists() or shutil.which("setpriv") is None,
                    reason="needs the system's python3.11 (the test interpreter is unreadable to nobody) and setpriv")
def test_without_root_the_ipc_limits_hold_in_the_workers_user_namespace(world, package_for_nobody):
    """As ``nobody`` (no throwaway uid, no pid namespace: the fallback layers of issue 20): the
    worker is root of its user namespace only while it sets up, writes the IPC limits, and
    leaves through a nested user namespace; /proc/sys is read-only in its root."""
    attack = SYSCTL_RAISE + SHM_ATTACK.replace('raise RuntimeError(f"', 'raise RuntimeError(f"sysctl={raised} ')
    script = NOBODY_ORCHESTRATOR.replace("REPO", repr(package_for_nobody))
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3.11",
                          "-c", script], input=game(reset=attack), capture_output=True, text=True, timeout=120,
                         cwd="/", env={"TMPDIR": world.tempdir, "HOME": "/"})
    assert out.returncode == 0, out.stderr[-2000:]
    for name, run in json.loads(out.stdout).items():
        applied = run["applied"]
        assert (applied["uid"], applied["ipc_limits"], applied["filesystem_narrowed"]) == (65534, True, True), name
        assert run["message"] == "reset() raised RuntimeError: sysctl=OSError filled=128MB live=0", (name, run)
        assert run["shmem_delta"] < 48 * MB, (name, run)
    asyncio.run(_one_benign_sandbox())
