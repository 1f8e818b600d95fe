"""Hostile environments: the sandbox holds (issue 9).

Every test is one hostile behaviour written as its own small environment: a valid
guessing game (``game()``) with hostile code spliced into its constructor, ``reset``,
``step`` or ``reference_actions``. It goes through the real entry points --
``validate_environment`` (rejected, with the specific reason) or ``play_episode``
(``incomplete`` / ``env_error``, with the specific error) -- in real sandboxes, while a
benign bystander environment runs in another sandbox alongside. After each test the
``world`` fixture checks that nothing leaked or outlived the run: every sandbox closed,
no process left under any uid the test's sandboxes used (other test runs on the machine
have sandboxes of their own, so the whole uid range is not ours to check), no worker
left under the fork server or this process, no temporary directory left, the fork server
itself still the same process, and the canary secret (in this process's environment
while the test runs) in no output, error or reject reason.

Environments report what they managed to do by raising it (so it lands in the reason
text the test asserts on), and the tests also check the outside world: the listener
that was never contacted, the files that were not created.
"""

from __future__ import annotations

import asyncio
import os
import select
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from envduels_dagster.core.authoring.validation import validate_environment
from envduels_dagster.core.models import Gateway
from envduels_dagster.core.models.registry import load_registry
from envduels_dagster.core.play.episode import PlayConfig, play_episode
from envduels_dagster.core.sandbox import UID_BASE, UID_SPAN, SandboxLimits
from tests.helpers.hostile import (  # noqa: F401 - world is a fixture
    BENIGN,
    CANARY,
    LIMITS,
    ROOMY,
    alongside,
    assert_no_canary,
    game,
    rejected,
    spec,
    world,
)
from tests.helpers.paths import REPO

pytestmark = pytest.mark.skipif(
    os.getuid() != 0,
    reason="the hostile suite needs root: throwaway uids and namespaces are what it proves",
)

FAKE_WIN = ('{"ok": true, "observation": "You win!", "reward": 1.0, "terminated": true, '
            '"truncated": false, "info": {}}')
SANDBOX_UIDS = range(UID_BASE, UID_BASE + UID_SPAN)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    path = tmp_path_factory.mktemp("registry") / "models.yaml"
    path.write_text("models:\n  - name: solver\n    model: envduels-sim/journeyman\n")
    return Gateway(load_registry(path))


def played(gateway, source: str, limits: SandboxLimits = LIMITS, seed: int = 0) -> str:
    """Play one episode next to a bystander; it must end incomplete/env_error. Return the error."""
    rec = asyncio.run(alongside(play_episode(gateway, "solver", spec(source), seed, "cold", PlayConfig(limits=limits))))
    assert_no_canary(rec)
    assert (rec.status, rec.stop_reason) == ("incomplete", "env_error"), (rec.status, rec.stop_reason, rec.error)
    return rec.error


# --------------------------------------------------------------------------- controls


def test_control_the_benign_game_is_valid_and_playable(world, gateway):
    """The template itself is fine: every rejection below comes from the hostile splice."""
    result = asyncio.run(alongside(validate_environment(spec(BENIGN), LIMITS)))
    assert (result.valid, result.winnability, result.reject_reason) == (True, "proven", None)
    rec = asyncio.run(play_episode(gateway, "solver", spec(BENIGN), 0, "cold", PlayConfig(limits=LIMITS)))
    assert rec.status in ("success", "failure") and rec.stop_reason != "env_error", rec


# --------------------------------------------------------------------------- time and CPU


@pytest.mark.slow  # about a second or more (--durations, 1 Dec 2026): kept out of the inner loop
def test_infinite_loop_in_step(world, gateway):
    error = played(gateway, game(step="while True:\n    pass"))
    assert error == "timeout: step() did not answer within 1 s"


@pytest.mark.slow  # about a second or more (--durations, 1 Dec 2026): kept out of the inner loop
def test_sleeping_past_the_deadline_in_reference_actions(world):
    reason = rejected(game(reference="import time\ntime.sleep(120)"))
    assert reason == "timeout during reference_actions(seed=0): reference_actions() did not answer within 1 s"


@pytest.mark.slow  # about a second or more (--durations, 1 Dec 2026): kept out of the inner loop
def test_cpu_burn_that_ignores_sigxcpu_hits_the_hard_cpu_limit(world):
    limits = SandboxLimits(step_timeout_s=20.0, cpu_seconds=1, memory_mb=256)
    t0 = time.monotonic()
    burn = "import _signal\n_signal.signal(_signal.SIGXCPU, _signal.SIG_IGN)\nwhile True:\n    pass"
    reason = rejected(game(init=burn), limits)
    assert reason == "resource_limit during reset(seed=0): CPU limit of 1 s exceeded during reset()"
    assert time.monotonic() - t0 < 15, "ended by the CPU limit, not by the 20 s deadline"


# --------------------------------------------------------------------------- memory and size


def test_memory_bomb_in_the_constructor(world):
    reason = rejected(game(init="self.hog = bytearray(3 * 1024 ** 3)"))
    assert reason == "resource_limit during reset(seed=0): memory limit of 256 MB exceeded"


def test_memory_bomb_by_growth_in_step(world, gateway):
    limits = SandboxLimits(step_timeout_s=20.0, cpu_seconds=10, memory_mb=256)
    error = played(gateway, game(step="hog = []\nwhile True:\n    hog.append(bytearray(8 * 1024 * 1024))"), limits)
    assert error == "resource_limit: memory limit of 256 MB exceeded"


def test_huge_observation_is_refused_before_it_leaves_the_worker(world, gateway):
    error = played(gateway, game(reset="return 'x' * 300_000_000, {}"), ROOMY)
    assert error == "protocol_violation: reset() returned an observation of 300000000 chars; limit is 20000"


def test_filling_the_disk_stops_at_the_private_workdir(world, gateway):
    body = """
    for i in range(1000):
        with open(f"fill-{i}.bin", "wb") as fh:
            fh.write(b"x" * 900_000)
    """
    error = played(gateway, game(step=body))
    assert error.startswith("resource_limit: disk space limit exceeded in step(): [Errno 28] No space left on device")


# --------------------------------------------------------------------------- processes and threads


def test_fork_in_the_constructor(world):
    reason = rejected(game(init="import os\nif os.fork() == 0:\n    os._exit(0)"))
    assert reason == ("crash during reset(seed=0): constructor raised BlockingIOError: "
                      "[Errno 11] Resource temporarily unavailable")


def test_spawn_and_exec_in_step(world, gateway):
    body = """
    import os
    errors = []
    try:
        os.posix_spawn("/bin/sh", ["sh", "-c", "touch /tmp/pwned"], {})
    except OSError as exc:
        errors.append(f"spawn: {type(exc).__name__}")
    os.execv("/usr/bin/su", ["su", "-c", "id"])  # exec needs no new process; seccomp refuses it
    """
    error = played(gateway, game(step=body))
    assert error == "crash: step() raised PermissionError: [Errno 1] Operation not permitted"


def test_threads_cannot_be_started_to_outlive_the_call(world):
    body = """
    import _thread
    def linger():
        while True:
            pass
    _thread.start_new_thread(linger, ())
    """
    reason = rejected(game(init=body))
    assert reason == "crash during reset(seed=0): constructor raised RuntimeError: can't start new thread"


def test_timers_cannot_run_code_between_calls(world):
    """With no threads and no timers, environment code runs only inside its calls: a signal
    handler armed to forge reply lines while the worker waits for the parent never fires."""
    body = f"""
    import _signal, os
    def forge(*_):
        for fd in range(3, 64):
            try:
                os.write(fd, {FAKE_WIN!r}.encode() + b"\\n")
            except OSError:
                pass
    _signal.signal(_signal.SIGALRM, forge)
    results = []
    try:
        _signal.setitimer(_signal.ITIMER_REAL, 0.01, 0.01)
        results.append("itimer=set")
    except OSError as exc:
        results.append(f"itimer={{type(exc).__name__}}")
    results.append(f"alarm={{_signal.alarm(1)}}")
    raise RuntimeError(" ".join(results))
    """
    reason = rejected(game(reset=body))
    # alarm() returned (unsigned) -1: refused by the seccomp filter, like setitimer().
    assert reason == ("crash during reset(seed=0): reset() raised RuntimeError: "
                      "itimer=itimer_error alarm=4294967295")


@pytest.mark.parametrize(("limits", "denied_some"), [
    (LIMITS, False),  # its own pid namespace: no other pid in sight to try (issue 20)
    (SandboxLimits(step_timeout_s=1.0, fork_server=False, narrow_filesystem=False), True),  # the host's pids
], ids=["default-pid-namespace", "host-pids-visible"])
def test_killing_the_parent_everyone_and_every_pid(world, limits, denied_some):
    body = """
    import os
    SIGKILL = 9
    outcome = {}
    for label, target in (("parent", os.getppid()), ("everyone", -1)):
        try:
            os.kill(target, SIGKILL)
            outcome[label] = "sent"
        except OSError as exc:
            outcome[label] = type(exc).__name__
    sent = denied = 0
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                os.kill(int(name), SIGKILL)
                sent += 1
            except PermissionError:
                denied += 1
            except ProcessLookupError:
                pass
    raise RuntimeError(f"parent={outcome['parent']} sent={sent} denied_some={denied > 0}")
    """
    reason = rejected(game(reset=body), limits)
    # The bystander (checked by alongside), this process and the fork server (checked by
    # world) all survived: a throwaway uid may signal nobody but itself.
    assert reason == ("crash during reset(seed=0): reset() raised RuntimeError: "
                      f"parent=PermissionError sent=0 denied_some={denied_some}")


def test_killing_itself_is_reported_as_such(world, gateway):
    error = played(gateway, game(step="import os\nos.kill(os.getpid(), 9)"))
    assert error.startswith("crash: worker was killed by SIGKILL during step() after ")
    assert error.endswith("not by the sandbox: the environment killed itself or the kernel ran out of memory")


def test_crashing_the_interpreter_with_ctypes(world, gateway):
    error = played(gateway, game(step="import ctypes\nctypes.string_at(0)"))
    assert error == "crash: worker died from signal SIGSEGV during step()"


def test_deep_recursion(world):
    reason = rejected(game(reference="def dive(n):\n    return dive(n + 1)\ndive(0)"))
    assert reason == ("crash during reference_actions(seed=0): recursion limit exceeded in reference_actions(): "
                      "maximum recursion depth exceeded")


def test_deep_recursion_past_a_raised_limit_overflows_the_c_stack(world):
    body = """
    import sys
    sys.setrecursionlimit(10 ** 7)
    class Mirror:
        def __repr__(self):
            return repr(self)
    repr(Mirror())
    """
    reason = rejected(game(init=body))
    assert reason == "crash during reset(seed=0): worker died from signal SIGSEGV during reset()"


# --------------------------------------------------------------------------- network


class Listener:
    """A real TCP listener on 127.0.0.1 (and a UDP one) that record whether anyone came."""

    def __enter__(self):
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.port, self.udp_port = self.tcp.getsockname()[1], self.udp.getsockname()[1]
        return self

    def contacts(self, wait_s: float = 0.3) -> int:
        n, deadline = 0, time.monotonic() + wait_s
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self.tcp, self.udp], [], [], left)
            for sock in ready:
                if sock is self.tcp:
                    sock.accept()[0].close()
                else:
                    sock.recv(65536)
                n += 1
        return n

    def __exit__(self, *exc):
        self.tcp.close()
        self.udp.close()


NETWORK_PROBE = """
import ctypes, errno, sys
DNS = True
libc = ctypes.CDLL(None, use_errno=True)
def addr(port):
    return (2).to_bytes(2, sys.byteorder) + port.to_bytes(2, "big") + bytes([127, 0, 0, 1]) + bytes(8)
results = []
fd = libc.socket(2, 1, 0)  # TCP
rc = libc.connect(fd, addr(TCP_PORT), 16)
results.append("tcp=" + ("CONNECTED" if rc == 0 else errno.errorcode[ctypes.get_errno()]))
fd = libc.socket(2, 2, 0)  # UDP, e.g. a DNS query carrying a secret
rc = libc.sendto(fd, b"exfiltrate", 10, 0, addr(UDP_PORT), 16)
results.append("udp=" + ("SENT" if rc >= 0 else errno.errorcode[ctypes.get_errno()]))
if DNS:
    res = ctypes.c_void_p()
    results.append(f"dns={libc.getaddrinfo(b'example.com', b'80', None, ctypes.byref(res))}")
raise RuntimeError(" ".join(results))
"""


def test_network_to_a_loopback_listener_and_dns(world):
    with Listener() as lst:
        probe = NETWORK_PROBE.replace("TCP_PORT", str(lst.port)).replace("UDP_PORT", str(lst.udp_port))
        reason = rejected(game(reset=probe))
        assert lst.contacts() == 0, "the sandboxed environment reached the orchestrator's listener"
    # Its own network namespace has no interface up: unreachable; DNS fails (EAI_AGAIN).
    assert reason == ("crash during reset(seed=0): reset() raised RuntimeError: "
                      "tcp=ENETUNREACH udp=ENETUNREACH dns=-3")


def test_network_probe_positive_control(world):
    """The same probe does reach the listener when the network is not isolated (root, no drop)."""
    limits = SandboxLimits(step_timeout_s=2.0, isolate_network=False, drop_privileges=False)
    with Listener() as lst:
        probe = NETWORK_PROBE.replace("TCP_PORT", str(lst.port)).replace("UDP_PORT", str(lst.udp_port))
        probe = probe.replace("DNS = True", "DNS = False")  # no lookups on the real network
        reason = rejected(game(reset=probe), limits)
        assert lst.contacts() == 2
    assert reason.endswith("tcp=CONNECTED udp=SENT")


def test_host_reaching_standard_modules_load_but_stay_refused(world, tmp_path):
    """The whole standard library is importable now (issue 21): subprocess, socket, urllib,
    asyncio, threading, multiprocessing all load -- and the confinement, not a missing module,
    refuses what they reach for. Nothing ran, nothing was created, the listener heard nobody."""
    marker = tmp_path / "ran"
    tmp_path.chmod(0o777)  # writable by the throwaway uid if the mount namespace failed it
    with Listener() as lst:
        body = f"""
        import asyncio, concurrent.futures, multiprocessing, os, shutil, signal, socket, subprocess
        import threading, urllib.request
        results = []
        def attempt(label, fn):
            try:
                results.append(f"{{label}}=DONE:{{fn()!r}}")
            except BaseException as exc:
                results.append(f"{{label}}={{type(exc).__name__}}")
        attempt("subprocess", lambda: subprocess.run(["/bin/sh", "-c", "touch {marker}"]))
        attempt("tcp", lambda: socket.create_connection(("127.0.0.1", {lst.port}), timeout=1))
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        attempt("udp", lambda: udp.sendto(b"x", ("127.0.0.1", {lst.udp_port})))
        attempt("http", lambda: urllib.request.urlopen("http://127.0.0.1:{lst.port}/", timeout=1))
        attempt("asyncio", lambda: asyncio.run(asyncio.open_connection("127.0.0.1", {lst.port})))
        attempt("thread", lambda: threading.Thread(target=print).start())
        attempt("process", lambda: multiprocessing.Process(target=print).start())
        attempt("pool", lambda: concurrent.futures.ThreadPoolExecutor(1).submit(print).result())
        attempt("system", lambda: os.waitstatus_to_exitcode(os.system("touch {marker}")))
        attempt("popen", lambda: os.popen("touch {marker}").read())
        attempt("setuid", lambda: os.setuid(0))
        attempt("kill_parent", lambda: os.kill(os.getppid(), signal.SIGKILL))
        attempt("rmtree", lambda: shutil.rmtree("{Path(__file__).resolve().parent}"))
        raise RuntimeError(" ".join(results))
        """
        reason = rejected(game(reset=body))
        assert lst.contacts() == 0, "the sandboxed environment reached the orchestrator's listener"
    # glibc's system() reports a shell it could not start as exit status 127: no process was made.
    # The tests directory is not in the worker's narrowed root (issue 20; read-only before: OSError).
    assert reason == ("crash during reset(seed=0): reset() raised RuntimeError: subprocess=BlockingIOError "
                      "tcp=OSError udp=OSError http=URLError asyncio=OSError thread=RuntimeError "
                      "process=BlockingIOError pool=RuntimeError system=DONE:127 popen=BlockingIOError "
                      "setuid=PermissionError kill_parent=PermissionError rmtree=FileNotFoundError")
    assert not marker.exists(), "a process started by environment code ran"
    assert Path(__file__).exists(), "the tests directory was removed"


# --------------------------------------------------------------------------- secrets and files


SNOOP = """
import os
found = {"environ": sorted(set(os.environ) - {"LC_CTYPE"})}  # Python's own C-locale coercion (PEP 538)
seen = []
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    for leaf in ("environ", "mem"):
        try:
            with open(f"/proc/{pid}/{leaf}", "rb") as fh:
                data = fh.read(1 << 20)
            seen.append((pid, leaf, len(data)))
            if b"CANARY_PREFIX" in data:
                found["secret"] = data.split(b"CANARY_PREFIX")[1][:40].decode(errors="replace")
        except OSError:
            pass
own = [s for s in seen if s[0] == str(os.getpid())]
raise RuntimeError(f"environ={found['environ']} readable_elsewhere={len(seen) - len(own)} "
                   f"secret={found.get('secret', 'none')}")
"""


def test_reading_environment_variables_of_anyone(world, gateway):
    """The canary is in this process's environment and in a helper process's; neither is readable."""
    helper = subprocess.Popen(["sleep", "30"], env={"ENVDUELS_CANARY_SECRET": CANARY})
    try:
        error = played(gateway, game(reset=SNOOP.replace("CANARY_PREFIX", "canary-")))
    finally:
        helper.kill()
        helper.wait()
    assert error == "crash: reset() raised RuntimeError: environ=[] readable_elsewhere=0 secret=none"


@pytest.fixture
def private_home(monkeypatch):
    """An ENVDUELS_HOME (0700, as settings makes it) with a warehouse, a call cache and a canary file.

    Its parent is traversable by anyone (0711), so that only the home's own 0700 stands
    between the sandbox and the files when the mount namespace is off."""
    import duckdb

    from envduels_dagster.core.models.call_cache import CallCache
    from envduels_dagster.settings import locations as settings

    base = tempfile.mkdtemp(prefix="envduels-home-", dir=os.environ.get("TMPDIR") or "/tmp")
    os.chmod(base, 0o711)
    monkeypatch.setenv("ENVDUELS_HOME", os.path.join(base, "home"))
    home = settings.envduels_home()
    assert (home.stat().st_mode & 0o777) == 0o700
    conn = duckdb.connect(str(settings.warehouse_path()))
    conn.execute("CREATE TABLE secrets AS SELECT ? AS value", [CANARY])
    conn.close()
    CallCache(settings.cache_path()).put("k", "solver", {"text": CANARY})
    secret = home / "secret.txt"
    secret.write_text(CANARY)  # default permissions: world-readable, but in a 0700 directory
    assert secret.stat().st_mode & 0o004
    yield {"home": home, "warehouse": settings.warehouse_path(), "cache": settings.cache_path(), "secret": secret}
    shutil.rmtree(base, ignore_errors=True)


READ_FILES = """
results = []
for path in PATHS:
    try:
        with open(path, "rb") as fh:
            results.append("READ " + fh.read(200).decode(errors="replace"))
    except OSError as exc:
        results.append(type(exc).__name__)
raise RuntimeError(" ".join(results))
"""


@pytest.mark.parametrize(("limits", "denial"), [
    (LIMITS, "FileNotFoundError"),  # /tmp is a private, empty tmpfs in the sandbox's mount namespace
    (SandboxLimits(step_timeout_s=1.0, isolate_filesystem=False), "PermissionError"),  # the 0700 dir holds
], ids=["default", "no-mount-namespace"])
def test_reading_the_warehouse_the_call_cache_and_private_files(world, private_home, limits, denial):
    paths = [str(private_home[k]) for k in ("warehouse", "cache", "secret")] + [str(private_home["home"])]
    reason = rejected(game(reference=READ_FILES.replace("PATHS", repr(paths))), limits)
    assert reason == ("crash during reference_actions(seed=0): reference_actions() raised RuntimeError: "
                      + " ".join([denial] * 4))


@pytest.mark.parametrize(("limits", "seen"), [
    (LIMITS, "passwd=FileNotFoundError sees_orchestrator=FileNotFoundError"),
    (SandboxLimits(step_timeout_s=1.0, fork_server=False, narrow_filesystem=False),
     "passwd=root sees_orchestrator=True"),
], ids=["default-narrowed-root-and-pid-namespace", "documented-limit-without-them"])
def test_documented_limit_world_readable_files_and_process_list_are_visible(world, limits, seen):
    """Without a narrowed root and a pid namespace (``narrow_filesystem=False``, a fresh
    interpreter per worker), world-readable host files and other processes' command lines
    are readable (docs/THREAT-MODEL.md): keep secrets in 0600 files, 0700 directories or the
    environment -- never in a world-readable file or on a command line. The default layer
    hides both (issue 20)."""
    body = f"""
    import os
    try:
        passwd = open("/etc/passwd").read().split(":")[0]
    except OSError as exc:
        passwd = type(exc).__name__
    try:
        cmdline = open("/proc/{os.getpid()}/cmdline", "rb").read()
        sees = b'pytest' in cmdline or b'python' in cmdline
    except OSError as exc:
        sees = type(exc).__name__
    raise RuntimeError(f"passwd={{passwd}} sees_orchestrator={{sees}}")
    """
    reason = rejected(game(reset=body), limits)
    assert reason == "crash during reset(seed=0): reset() raised RuntimeError: " + seen


def test_writing_outside_the_working_directory(world, gateway, tmp_path):
    open_dir = tmp_path / "world-writable"
    open_dir.mkdir()
    open_dir.chmod(0o1777)
    repo = REPO
    name = "pwned-" + os.urandom(4).hex()
    targets = [open_dir / name, Path("/tmp") / name, Path("/var/tmp") / name, Path("/dev/shm") / name,
               repo / name]
    body = f"""
    results = []
    for path in {[str(t) for t in targets]!r}:
        try:
            with open(path, "w") as fh:
                fh.write("pwned")
            results.append("WROTE")
        except OSError as exc:
            results.append(type(exc).__name__)
    with open("inside.txt", "w") as fh:  # its own working directory is fine
        fh.write("ok")
    raise RuntimeError(" ".join(results))
    """
    error = played(gateway, game(step=body))
    prefix = "crash: step() raised RuntimeError: "
    assert error.startswith(prefix)
    results = error[len(prefix):].split()
    assert results[:4] == ["FileNotFoundError", "PermissionError", "PermissionError", "PermissionError"]
    # The repository is read-only (EROFS -> OSError), or hidden when it lives under /tmp (FileNotFoundError).
    assert results[4] in ("OSError", "FileNotFoundError")
    for target in targets:
        assert not target.exists(), f"the environment created {target}"


def test_sysv_shared_memory_does_not_outlive_the_worker(world):
    key = 0x5EC0000 + int.from_bytes(os.urandom(2), "big")
    body = f"""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    shmid = libc.shmget({key}, 1 << 20, 0o1000 | 0o666)  # IPC_CREAT
    raise RuntimeError(f"shmget={{'ok' if shmid >= 0 else 'failed'}}")
    """
    reason = rejected(game(init=body))
    assert reason == "crash during reset(seed=0): constructor raised RuntimeError: shmget=ok"
    # It lived in the worker's own IPC namespace, destroyed with the worker.
    keys = [int(line.split()[0]) for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]]
    assert key not in keys


# --------------------------------------------------------------------------- output and the protocol


def test_flooding_stdout_and_stderr_with_fake_protocol_lines(world, gateway):
    """Prints and writes to the inherited fds 1 and 2 go to /dev/null: the fake win never counts."""
    body = f"""
    import os, sys
    fake = {FAKE_WIN!r} + "\\n"
    for _ in range(2000):
        print(fake * 10, end="")
        print(fake * 10, file=sys.stderr, end="")
        os.write(1, fake.encode())
        os.write(2, fake.encode())
    sys.stdout.flush()
    """
    rec = asyncio.run(alongside(play_episode(gateway, "solver", spec(game(step=body)), 3, "cold", PlayConfig(limits=LIMITS))))
    assert_no_canary(rec)
    assert rec.stop_reason != "env_error", rec.error
    assert "You win!" not in rec.model_dump_json()
    assert rec.status == ("success" if rec.final_reward > 0 else "failure")


FIND_PROTOCOL_FD = """
import os, stat
def protocol_fds():
    fds = []
    for fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                fds.append(fd)
        except OSError:
            pass
    return fds
"""


def test_forged_reply_on_a_guessed_protocol_fd(world, gateway):
    """Blind forgery: the line lacks the request's random id, and the channel is dropped."""
    body = f"""
    for fd in protocol_fds():
        try:
            os.write(fd, {FAKE_WIN!r}.encode() + b"\\n")
        except OSError:
            pass
    """
    error = played(gateway, game(step=body, prelude=FIND_PROTOCOL_FD))
    assert error == ("protocol_violation: step() produced a reply line that does not answer the request "
                     "(wrong or missing request id): a forged or stray line")


STEAL_REQUEST_ID = """
import sys
def request_id():
    frame = sys._getframe()
    while frame is not None:
        msg = frame.f_locals.get("msg")
        if isinstance(msg, dict) and "id" in msg:
            return msg["id"]
        frame = frame.f_back
"""


def test_forged_reply_with_the_stolen_request_id_is_caught_by_the_closing_check(world, gateway):
    """Environment code can read the worker's memory and forge a reply carrying the right id.
    The forged line is taken as the reply; the worker's real reply then arrives unasked and
    the episode's closing sync() voids the episode."""
    body = f"""
    line = {FAKE_WIN!r}[:-1] + ', "id": "' + request_id() + '"}}\\n'
    for fd in protocol_fds():
        try:
            os.write(fd, line.encode())
        except OSError:
            pass
    """
    error = played(gateway, game(step=body, prelude=FIND_PROTOCOL_FD + STEAL_REQUEST_ID))
    assert error.startswith("protocol_violation: "), error
    assert "forged or stray line" in error, error


def test_forged_reply_with_the_stolen_id_still_faces_the_parents_checks(world, gateway):
    """A forged reply that would bypass the worker's checks (a NaN reward, a huge observation)
    fails the parent's own checks of every reply."""
    body = """
    forged = '{"id": "' + request_id() + '", "ok": true, "observation": "' + 'x' * 50000 + '", '
    forged += '"reward": NaN, "terminated": true, "truncated": false, "info": {}}\\n'
    for fd in protocol_fds():
        try:
            os.write(fd, forged.encode())
        except OSError:
            pass
    os._exit(0)  # no real reply after it: the forged one alone is judged
    """
    error = played(gateway, game(step=body, prelude=FIND_PROTOCOL_FD + STEAL_REQUEST_ID))
    assert error == ("protocol_violation: step() produced a reply that fails the sandbox's checks: "
                     "the observation has 50000 chars; limit is 20000")


def test_patching_the_workers_own_checks_does_not_help(world, gateway):
    """Environment code shares the worker's process and can disable its checks; the parent's stand."""
    body = """
    import math
    math.isfinite = lambda value: True
    return "Wrong.", float("nan"), False, False, {}
    """
    error = played(gateway, game(step=body))
    assert error == ("protocol_violation: step() produced a reply that fails the sandbox's checks: "
                     "the reward is not finite (nan)")


def test_oversized_raw_line_on_the_protocol_fd(world, gateway):
    body = """
    chunk = b"x" * (1 << 20)
    for fd in protocol_fds():
        try:
            for _ in range(8):
                os.write(fd, chunk)
        except OSError:
            pass
    """
    error = played(gateway, game(step=body, prelude=FIND_PROTOCOL_FD))
    # A reset/step reply is capped tighter than other replies (issue 20): the observation and info caps.
    assert error == f"protocol_violation: step() produced a reply larger than {LIMITS.step_reply_bytes()} bytes"


def test_silencing_the_protocol_fd(world, gateway):
    body = """
    devnull = os.open("/dev/null", os.O_WRONLY)
    for fd in protocol_fds():
        os.dup2(devnull, fd)
    """
    error = played(gateway, game(step=body, prelude=FIND_PROTOCOL_FD))
    # The reply went to /dev/null and reading the next request failed: the worker gave up
    # (71 is the fork server child's exit code for an error in the protocol loop itself).
    assert error == "crash: worker exited with code 71 during step()"


# --------------------------------------------------------------------------- return shapes


@pytest.mark.parametrize(("splice", "reason"), [
    ({"reset": "return ['obs', {}]"},
     "protocol_violation during reset(seed=0): reset() must return (observation, info); got a list"),
    ({"reset": "return 'obs\\ud800', {}"},
     "protocol_violation during reset(seed=0): the observation from reset() is not valid Unicode "
     "(it contains a lone surrogate)"),
    ({"prelude": "class Small(str):\n    def __len__(self):\n        return 1",
      "reset": "return Small('x' * 30000), {}"},
     "protocol_violation during reset(seed=0): reset() returned an observation of 30000 chars; limit is 20000"),
    ({"reset": "info = {}\nfor _ in range(5000):\n    info = {'next': info}\nreturn 'obs', info"},
     "protocol_violation during reset(seed=0): reset() returned an info dict nested too deeply"),
    ({"reset": "info = {}\nfor _ in range(100):\n    info = {'next': info}\nreturn 'obs', info"},
     "protocol_violation during reset(seed=0): reset() returned an info dict nested deeper than 32 levels"),
    ({"reference": "return [1, 2, 3]"},
     "protocol_violation during reference_actions(seed=0): reference_actions() must return a list of strings"),
], ids=["reset-list", "lone-surrogate", "lying-str-subclass", "info-5000-deep", "info-100-deep",
        "reference-ints"])
def test_wrong_return_shapes_are_rejected(world, splice, reason):
    assert rejected(game(**splice)) == reason


@pytest.mark.parametrize(("step", "error"), [
    ("return 'obs', float('nan'), True, False, {}", "protocol_violation: step() returned a non-finite reward (nan)"),
    ("return 'obs', float('-inf'), True, False, {}", "protocol_violation: step() returned a non-finite reward (-inf)"),
    ("return 'obs', 10 ** 400, True, False, {}", "protocol_violation: step() returned a reward too large for a float"),
    ("return 'obs', 1.0, True, {}",
     "protocol_violation: step() must return (observation, reward, terminated, truncated, info); "
     "got a tuple of length 4"),
    ("class Truthy:\n    def __bool__(self):\n        raise SystemExit\nreturn 'obs', 1.0, Truthy(), False, {}",
     "protocol_violation: step() returned a Truthy terminated; expected bool"),
], ids=["nan", "-inf", "huge-int", "four-tuple", "hostile-bool"])
def test_wrong_step_results_void_the_episode(world, gateway, step, error):
    assert played(gateway, game(step=step)) == error


def test_control_characters_in_environment_messages_are_escaped(world):
    """An exception text carrying ESC, CR and BEL (a terminal line rewrite forging a verdict)
    reaches the reject reason -- and so a terminal -- only as visible escapes (issue 20)."""
    forged = "\\x1b[2K\\r\\x07hostile: valid, winnability proven"
    reason = rejected(game(reset=f"raise RuntimeError('oops{forged}')"))
    assert reason == ("crash during reset(seed=0): reset() raised RuntimeError: "
                      "oops\\x1b[2K\\x0d\\x07hostile: valid, winnability proven")
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in reason), repr(reason)


def test_load_time_attacks_are_load_errors(world):
    """Module-level code runs at load: a hard exit there is a crash of the load."""
    reason = rejected(game(prelude="import os\nos._exit(3)"))
    assert reason == "crash during loading: worker exited with code 3 during loading the environment"


# --------------------------------------------------------------------------- the stronger layer


needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bubblewrap is not installed (Debian: apt-get install -y bubblewrap)")
BWRAP = SandboxLimits(step_timeout_s=3.0, load_timeout_s=15.0, cpu_seconds=5, memory_mb=256, wrapper="bwrap")


@needs_bwrap
def test_bwrap_layer_runs_the_benign_game(world):
    result = asyncio.run(validate_environment(spec(BENIGN), BWRAP))
    assert (result.valid, result.reject_reason) == (True, None)


@needs_bwrap
def test_bwrap_layer_hides_host_files_and_processes(world):
    """What the default layer documents as visible is gone under bubblewrap."""
    body = f"""
    import os
    results = []
    for path in ("/etc/passwd", "/proc/{os.getpid()}/cmdline", "/work"):
        try:
            open(path).read()
            results.append("READ")
        except OSError as exc:
            results.append(type(exc).__name__)
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    raise RuntimeError(f"{{' '.join(results)}} pids={{pids}}")
    """
    reason = rejected(game(reset=body), BWRAP)
    prefix = "crash during reset(seed=0): reset() raised RuntimeError: FileNotFoundError FileNotFoundError "
    assert reason.startswith(prefix) and reason.endswith(" pids=[1, 2]")
    # /work is bound read-only when the repository lives there (a directory), absent otherwise.
    assert reason[len(prefix):-len(" pids=[1, 2]")] in ("IsADirectoryError", "FileNotFoundError")


@needs_bwrap
def test_bwrap_layer_contains_network_and_crashes(world):
    with Listener() as lst:
        probe = NETWORK_PROBE.replace("TCP_PORT", str(lst.port)).replace("UDP_PORT", str(lst.udp_port))
        reason = rejected(game(reset=probe), BWRAP)
        assert lst.contacts() == 0
    # bubblewrap brings up a loopback of the sandbox's own: nobody listens there.
    assert reason == "crash during reset(seed=0): reset() raised RuntimeError: tcp=ECONNREFUSED udp=SENT dns=-3"
    reason = rejected(game(init="import ctypes\nctypes.string_at(0)"), BWRAP)
    assert reason == "crash during reset(seed=0): worker died from signal SIGSEGV during reset()"
