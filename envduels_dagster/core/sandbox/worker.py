"""Worker that runs untrusted environment code. Executed as a script, never imported by the parent.

Two ways to start (see the package's launchers and docs/THREAT-MODEL.md):

* ``python -I -S -B worker.py`` -- one fresh interpreter per environment. The
  request pipe is stdin, the reply pipe stdout.
* ``python -I -S -B worker.py --fork-server FD`` -- a long-lived template
  ("zygote") that preloads the interpreter once and forks one child per environment.
  It never runs untrusted code and never sees environment source: the parent sends it
  only the child's pipe ends (SCM_RIGHTS over the unix socket FD); the child serves the
  protocol on them exactly like a fresh worker. The zygote reports each child's pid (with
  a pidfd, so the parent can kill it without pid-reuse races) and, once reaped, its wait
  status and CPU time over a per-child status socket.

Either way the worker confines itself *before* reading any untrusted code: private
network, IPC and mount namespaces (everything read-only but a private tmpfs working
directory), a throwaway uid with no groups, no_new_privs, resource limits (no child
processes or threads), a seccomp filter against the kernel's riskiest system calls, and
stdio detached from the protocol pipes. Only the standard library may be used here.
Protocol: one JSON object per line in both directions; every reply echoes the request's
``id`` (the parent drops the channel on a reply that does not). The first request is the
start configuration: the confinement to apply and every limit this script enforces
(``limits.worker_config`` on the parent's side), so no limit is restated here.
"""

import errno
import json
import math
import os
import resource
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 32, 1024, 2048, 4096
MS_REC, MS_PRIVATE, MS_RELATIME = 16384, 1 << 18, 1 << 21

PR_SET_PDEATHSIG, PR_SET_NAME, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP = 1, 15, 38, 22
SECCOMP_MODE_FILTER = 2

# World-writable scratch directories: covered by an empty root-owned tmpfs in the
# environment's mount namespace, so writing outside the working directory fails.
SCRATCH_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/run/shm", "/dev/mqueue")

# x86-64 system calls an environment has no business making. Refused with EPERM (the
# 32-bit x32 ABI is refused wholesale). Forking is refused by RLIMIT_NPROC=0 already;
# execve is here because exec needs no new process and would replace the worker.
SECCOMP_DENY_X86_64 = {
    "execve": 59, "execveat": 322, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
    "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313,
    "delete_module": 176, "bpf": 321, "userfaultfd": 323, "perf_event_open": 298, "keyctl": 250,
    "add_key": 248, "request_key": 249, "unshare": 272, "setns": 308, "mount": 165, "umount2": 166,
    "pivot_root": 155, "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163, "quotactl": 179,
    "chroot": 161, "name_to_handle_at": 303, "open_by_handle_at": 304, "syslog": 103,
    "lookup_dcookie": 212, "vhangup": 153, "iopl": 172, "ioperm": 173,
    # Timers would run environment code (a signal handler) between requests, while the
    # worker waits for the parent: with no threads either, code runs only inside calls.
    "alarm": 37, "setitimer": 38, "timer_create": 222,
}

# Imported before privileges drop, for speed: without the fork server every module here
# is paid for at each worker start; with it, once per orchestrator process. Every other
# standard-library module is imported on demand from STDLIB_VIEW (below).
PRELOADED_MODULES = (
    "__future__", "abc", "bisect", "collections", "copy", "dataclasses", "enum", "functools",
    "hashlib", "heapq", "itertools", "json", "math", "operator", "random", "re", "string",
    "textwrap", "typing",
)

# The throwaway uid cannot read the interpreter's library directory when it lives in a
# private place (here: /root/.pyenv, /root is 0700), and environments written as models
# write them import statistics, fractions, __future__... (issue 21). In the worker's own
# mount namespace, the library directory alone is bound read-only here -- inside the
# worker's private, root-owned /tmp -- with site-packages covered by an empty tmpfs, and
# sys.path points at it. Nothing else of the host becomes readable.
STDLIB_VIEW = "/tmp/.envduels-python-stdlib"

# The module environment code runs as (registered in sys.modules, as published consumers
# of EnvDuels exports load it): dataclasses and typing.get_type_hints look it up there.
ENV_MODULE = "envduels_env"

# What confine() itself needs after the privilege drop.
CONFINE_MODULES = ("ctypes", "platform", "struct", "_thread")

_LIBC = None


def _libc():
    global _LIBC
    if _LIBC is None:
        import ctypes

        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def _check(rc, what):
    if rc != 0:
        import ctypes

        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _unshare(flags):
    _check(_libc().unshare(flags), "unshare")


def _map_own_ids(uid, gid):
    """In a fresh user namespace (no root): keep our own uid and gid, mapped to themselves,
    so that files and mounts we create have an owner."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)


def _prctl(option, arg):
    import ctypes

    _check(_libc().prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)),
           f"prctl({option})")


def _mount(source, target, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc().mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def _mountinfo():
    """(mount point, flags to keep) of every mount, in mount order."""
    keep = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
            "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}
    out = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")  # \040 for spaces etc.
            flags = 0
            for opt in fields[5].split(","):
                flags |= keep.get(opt, 0)
            out.append((point, flags))
    return out


def _isolate_filesystem(workdir, uid, tmpfs_mb):
    """In a fresh mount namespace: everything read-only, scratch dirs empty, workdir a private tmpfs."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    failed = []
    for point, flags in _mountinfo():
        if point == "/proc" or point.startswith("/proc/"):
            continue  # procfs: per-process files, writable only by their owner; /proc/sys is root's
        try:
            _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except OSError:
            failed.append(point)
    if "/" in failed:
        raise OSError(errno.EPERM, "cannot make the root filesystem read-only")
    for path in SCRATCH_DIRS:
        if os.path.isdir(path) and not os.path.islink(path):
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,mode=755")
    os.makedirs(workdir, exist_ok=True)  # inside the fresh /tmp when the workdir lives there
    owner = "" if uid is None else f",uid={uid},gid={uid}"
    _mount("tmpfs", workdir, "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmpfs_mb}m,mode=700{owner}")
    return failed


def _stdlib_dir():
    import json as some_pure_package

    return os.path.dirname(os.path.dirname(some_pure_package.__file__))


def _readable_by_anyone(path):
    """Whether a uid with no relation to the owner can list ``path`` and reach it."""
    import stat

    path = os.path.realpath(path)
    if os.stat(path).st_mode & (stat.S_IROTH | stat.S_IXOTH) != (stat.S_IROTH | stat.S_IXOTH):
        return False
    parent = os.path.dirname(path)
    while True:
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return False
        if parent == "/":
            return True
        parent = os.path.dirname(parent)


def _mount_stdlib_view(lib):
    """Bind the standard library (only) read-only at STDLIB_VIEW and import from there."""
    import importlib

    os.mkdir(STDLIB_VIEW, 0o755)
    _mount(lib, STDLIB_VIEW, None, MS_BIND)
    _mount(None, STDLIB_VIEW, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    site = os.path.join(STDLIB_VIEW, "site-packages")
    if os.path.isdir(site):  # third-party packages of the base interpreter stay out of reach
        _mount("tmpfs", site, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=555")
    moved = lambda p: STDLIB_VIEW + p[len(lib):] if p == lib or p.startswith(lib + os.sep) else p  # noqa: E731
    sys.path[:] = [moved(p) for p in sys.path]
    # Packages imported already look for their submodules along their own __path__
    # (measured: socket.create_connection failed with "unknown encoding: idna" because
    # the encodings package still searched the unreadable original directory).
    for module in list(sys.modules.values()):
        path = getattr(module, "__path__", None)
        if isinstance(path, list):
            path[:] = [moved(p) for p in path]
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()


def _install_seccomp():
    import ctypes
    import struct

    ret_allow, ret_eperm = 0x7FFF0000, 0x00050000 | errno.EPERM
    ld_w_abs, jeq_k, jge_k, ret_k = 0x20, 0x15, 0x35, 0x06
    audit_arch_x86_64 = 0xC000003E
    prog = [
        (ld_w_abs, 0, 0, 4),                    # A = arch
        (jeq_k, 1, 0, audit_arch_x86_64),       # x86-64? skip the next
        (ret_k, 0, 0, ret_eperm),
        (ld_w_abs, 0, 0, 0),                    # A = syscall number
        (jge_k, 0, 1, 0x40000000),              # the x32 ABI
        (ret_k, 0, 0, ret_eperm),
    ]
    for nr in sorted(SECCOMP_DENY_X86_64.values()):
        prog += [(jeq_k, 0, 1, nr), (ret_k, 0, 0, ret_eperm)]
    prog.append((ret_k, 0, 0, ret_allow))
    raw = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog), ctypes.addressof(buf))
    _check(_libc().prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog),
                         ctypes.c_ulong(0), ctypes.c_ulong(0)), "seccomp")


def confine(cfg, forked=False):
    """Apply the isolation the parent asked for; return what was actually applied."""
    for name in PRELOADED_MODULES + CONFINE_MODULES:
        __import__(name)  # before the privilege drop: the library may not be readable after it
    import platform

    root = os.getuid() == 0
    wrapped = bool(cfg.get("wrapped"))  # bubblewrap already made the namespaces
    uid = cfg.get("uid") if root else None
    applied = {"network_isolated": wrapped, "filesystem_isolated": wrapped, "uid": os.getuid(),
               "seccomp": False, "fork_server": forked, "wrapper": cfg.get("wrapper")}
    if not wrapped:
        want_net, want_fs = bool(cfg.get("isolate_network")), bool(cfg.get("isolate_filesystem"))
        flags = (CLONE_NEWNET if want_net else 0) | (CLONE_NEWNS | CLONE_NEWIPC if want_fs else 0)
        user = 0 if root else CLONE_NEWUSER
        outer_ids = (os.getuid(), os.getgid())
        if flags:
            try:
                _unshare(flags | user)
                if user:
                    _map_own_ids(*outer_ids)
                applied["network_isolated"], applied["filesystem_isolated"] = want_net, want_fs
            except OSError as exc:
                applied["network_error"] = str(exc)
                if want_net and want_fs:  # e.g. no mount namespaces here: keep the network one
                    try:
                        _unshare(CLONE_NEWNET | user)
                        if user:
                            _map_own_ids(*outer_ids)
                        applied["network_isolated"] = True
                        applied.pop("network_error")
                    except OSError:
                        pass
                applied["filesystem_error"] = str(exc)
        if applied["filesystem_isolated"]:
            try:
                failed = _isolate_filesystem(cfg["workdir"], uid, cfg.get("tmpfs_mb", 16))
                if failed:
                    applied["read_only_failed"] = failed
            except OSError as exc:
                applied["filesystem_isolated"] = False
                applied["filesystem_error"] = str(exc)
    applied["stdlib"] = "host"  # the worker's own uid reads the library where it is
    if uid is not None and not _readable_by_anyone(_stdlib_dir()):
        applied["stdlib"] = "preloaded"  # only PRELOADED_MODULES, unless the view below works
        if applied["filesystem_isolated"] and not wrapped:
            try:
                _mount_stdlib_view(_stdlib_dir())
                applied["stdlib"] = "view"
            except OSError as exc:
                applied["stdlib_error"] = str(exc)
    try:
        os.chdir(cfg["workdir"])
    except OSError as exc:  # e.g. a mount namespace set up halfway: the parent refuses to go on
        applied["workdir_error"] = str(exc)
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        applied["uid"] = os.getuid()
    if forked:
        # Die with the fork server (setuid clears this, hence here). Environment code could
        # undo it; the parent's pidfd kill and deadlines do not depend on it.
        _prctl(PR_SET_PDEATHSIG, 9)
    mb = 1024 * 1024
    # (soft, hard). CPU: with soft == hard the kernel sends SIGKILL, not SIGXCPU, and the
    # parent could not tell a CPU overrun from any other kill; one second of slack makes
    # SIGXCPU (default action: terminate) arrive first, SIGKILL only if it is ignored.
    limits = [
        (resource.RLIMIT_AS, cfg["memory_mb"] * mb, cfg["memory_mb"] * mb),
        (resource.RLIMIT_CPU, cfg["cpu_seconds"], cfg["cpu_seconds"] + 1),
        (resource.RLIMIT_NOFILE, cfg["max_open_files"], cfg["max_open_files"]),
        (resource.RLIMIT_FSIZE, cfg["max_file_size_mb"] * mb, cfg["max_file_size_mb"] * mb),
        (resource.RLIMIT_NPROC, 0, 0),  # no processes and no threads (threads count too)
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_MSGQUEUE, 0, 0),
        (resource.RLIMIT_MEMLOCK, 0, 0),
    ]
    for which, soft, hard in limits:
        resource.setrlimit(which, (soft, hard))
    try:
        _prctl(PR_SET_NO_NEW_PRIVS, 1)  # a setuid binary cannot give privileges back
        applied["no_new_privs"] = True
    except OSError:
        applied["no_new_privs"] = False
    if cfg.get("seccomp", True) and platform.machine() == "x86_64":
        try:
            _install_seccomp()
            applied["seccomp"] = True
        except OSError as exc:
            applied["seccomp_error"] = str(exc)
    return applied


class ProtocolViolation(Exception):
    """The environment returned something the protocol does not allow."""


def _check_text(text, what, limit):
    if not isinstance(text, str):
        raise ProtocolViolation(f"{what} is a {type(text).__name__}; expected str")
    text = str.__str__(text)  # an exact str: a subclass could lie about its length
    if len(text) > limit:
        raise ProtocolViolation(f"{what} has {len(text)} chars; limit is {limit}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ProtocolViolation(f"{what} is not valid Unicode (it contains a lone surrogate)") from None
    return text


def _check_obs(obs, where, cfg):
    if not isinstance(obs, str):
        raise ProtocolViolation(f"{where} returned a {type(obs).__name__} observation; expected str")
    obs = str.__str__(obs)
    if len(obs) > cfg["max_observation_chars"]:
        raise ProtocolViolation(
            f"{where} returned an observation of {len(obs)} chars; limit is {cfg['max_observation_chars']}"
        )
    return _check_text(obs, f"the observation from {where}", cfg["max_observation_chars"])


def _depth(value, limit):
    """Nesting depth of a JSON value, iteratively (no recursion on hostile input)."""
    stack, deepest = [(value, 1)], 0
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            if level > limit:
                return level
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def _check_info(info, where, cfg):
    if not isinstance(info, dict):
        raise ProtocolViolation(f"{where} returned a {type(info).__name__} info; expected dict")
    try:
        clean = json.loads(json.dumps(info, default=repr))
    except RecursionError:
        raise ProtocolViolation(f"{where} returned an info dict nested too deeply") from None
    except (TypeError, ValueError) as exc:
        raise ProtocolViolation(f"{where} returned an info dict that cannot be serialised: {exc}") from None
    limit = cfg["max_info_depth"]
    if _depth(clean, limit) > limit:
        raise ProtocolViolation(f"{where} returned an info dict nested deeper than {limit} levels")
    return clean


def _thread_count():
    import _thread

    return _thread._count()


class Host:
    def __init__(self, cfg):
        self.cfg = cfg
        self.cls = None
        self.env = None
        self.max_turns = None

    def load(self, msg):
        import types

        module = types.ModuleType(ENV_MODULE)
        sys.modules[ENV_MODULE] = module
        namespace = module.__dict__
        try:
            code = compile(msg["source"], "<environment>", "exec")
            exec(code, namespace)
        except MemoryError:
            raise
        except BaseException as exc:  # noqa: BLE001 - any failure here is the author's
            return {"ok": False, "kind": "load_error", "message": f"source failed to load: {type(exc).__name__}: {exc}"}
        cls = namespace.get(msg["class_name"])
        if not isinstance(cls, type):
            return {"ok": False, "kind": "load_error", "message": f"class {msg['class_name']!r} is not defined by the source"}
        self.cls = cls
        self.max_turns = msg["max_turns"]
        for name in ("reset", "step"):
            if not callable(getattr(cls, name, None)):
                return {"ok": False, "kind": "load_error", "message": f"class {msg['class_name']!r} has no {name}() method"}
        return {"ok": True, "has_reference": callable(getattr(cls, "reference_actions", None))}

    def _fresh(self):
        if self.cls is None:
            raise ProtocolViolation("no environment loaded")
        return _call(self.cls, max_turns=self.max_turns, _where="constructor")

    def reset(self, msg):
        self.env = self._fresh()
        out = _call(self.env.reset, seed=msg["seed"])
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ProtocolViolation(f"reset() must return (observation, info); got {_shape(out)}")
        obs, info = out
        obs = _check_obs(obs, "reset()", self.cfg)
        return {"ok": True, "observation": obs, "info": _check_info(info, "reset()", self.cfg)}

    def step(self, msg):
        if self.env is None:
            raise ProtocolViolation("step() before reset()")
        out = _call(self.env.step, msg["action"])
        if not (isinstance(out, tuple) and len(out) == 5):
            raise ProtocolViolation(
                f"step() must return (observation, reward, terminated, truncated, info); got {_shape(out)}"
            )
        obs, reward, terminated, truncated, info = out
        obs = _check_obs(obs, "step()", self.cfg)
        if isinstance(reward, bool) or not isinstance(reward, (int, float)):
            raise ProtocolViolation(f"step() returned a {type(reward).__name__} reward; expected a number")
        try:
            reward = float(int.__index__(reward)) if isinstance(reward, int) else float.__float__(reward)
        except OverflowError:
            raise ProtocolViolation("step() returned a reward too large for a float") from None
        if not math.isfinite(reward):
            raise ProtocolViolation(f"step() returned a non-finite reward ({reward})")
        for name, flag in (("terminated", terminated), ("truncated", truncated)):
            if not isinstance(flag, bool):
                raise ProtocolViolation(f"step() returned a {type(flag).__name__} {name}; expected bool")
        return {
            "ok": True,
            "observation": obs,
            "reward": reward,
            "terminated": terminated,
            "truncated": truncated,
            "info": _check_info(info, "step()", self.cfg),
        }

    def reference(self, msg):
        env = self._fresh()
        fn = getattr(env, "reference_actions", None)
        if fn is None:
            return {"ok": True, "actions": None}
        actions = _call(fn, msg["seed"])
        if not isinstance(actions, (list, tuple)) or not all(isinstance(a, str) for a in actions):
            raise ProtocolViolation("reference_actions() must return a list of strings")
        most = self.cfg["max_reference_actions"]
        if len(actions) > most:
            raise ProtocolViolation(f"reference_actions() returned more than {most} actions")
        limit = self.cfg["max_observation_chars"]
        return {"ok": True, "actions": [_check_text(a, "a reference action", limit) for a in actions]}


class _EnvCrash(Exception):
    pass


class _LimitHit(Exception):
    """Environment code ran into one of the sandbox's rlimits (reported as resource_limit)."""


# rlimits that surface as OSError inside the environment rather than as a signal
# (Python ignores SIGXFSZ, so an oversized write fails with EFBIG).
_LIMIT_ERRNOS = {errno.EFBIG: "file size limit", errno.EMFILE: "open files limit", errno.ENOSPC: "disk space limit"}


def _shape(value):
    if isinstance(value, tuple):
        return f"a tuple of length {len(value)}"
    return f"a {type(value).__name__}"


def _call(fn, *args, _where=None, **kwargs):
    """Call environment code, turning whatever it raises into a classified failure."""
    where = _where or f"{getattr(fn, '__name__', 'call')}()"
    try:
        return fn(*args, **kwargs)
    except (MemoryError, ProtocolViolation):
        raise
    except RecursionError as exc:
        raise _EnvCrash(f"recursion limit exceeded in {where}: {exc}")
    except OSError as exc:
        if exc.errno in _LIMIT_ERRNOS:
            raise _LimitHit(f"{_LIMIT_ERRNOS[exc.errno]} exceeded in {where}: {exc}")
        raise _EnvCrash(f"{where} raised {type(exc).__name__}: {exc}")
    except BaseException as exc:  # noqa: BLE001 - SystemExit/KeyboardInterrupt from env code are crashes too
        raise _EnvCrash(f"{where} raised {type(exc).__name__}: {exc}")


def _message(text, limit):
    text = str(text)
    if len(text) > limit:
        text = text[:limit] + f"... [{len(text) - limit} more chars]"
    return text.encode("utf-8", "replace").decode("utf-8")


def serve(forked=False):
    """The protocol loop on fds 0 (requests) and 1 (replies)."""
    # Keep the protocol pipes on private fds; stdio of untrusted code goes nowhere.
    reader = os.fdopen(os.dup(0), "rb")
    out_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)

    def send(obj):
        data = memoryview(json.dumps(obj).encode() + b"\n")
        while data:
            data = data[os.write(out_fd, data):]

    cfg = json.loads(reader.readline())
    applied = confine(cfg, forked)
    send({"id": cfg.get("id"), "ok": True, "ready": True, "pid": os.getpid(), **applied})
    host = Host(cfg)
    handlers = {"load": host.load, "reset": host.reset, "step": host.step, "reference": host.reference,
                "sync": lambda msg: {"ok": True}}
    threads = _thread_count()
    while True:
        line = reader.readline()
        if not line:
            return
        msg = json.loads(line)
        op = msg.get("op")
        if op == "exit":
            return
        try:
            reply = handlers[op](msg)
            if _thread_count() > threads:
                raise ProtocolViolation(f"{op}() left a thread running after it returned; "
                                        "environments must not start threads")
        except ProtocolViolation as exc:
            reply = {"ok": False, "kind": "protocol_violation", "message": str(exc)}
        except _EnvCrash as exc:
            reply = {"ok": False, "kind": "crash", "message": str(exc)}
        except _LimitHit as exc:
            reply = {"ok": False, "kind": "resource_limit", "message": str(exc)}
        except MemoryError:
            reply = {"ok": False, "kind": "resource_limit",
                     "message": f"memory limit of {cfg['memory_mb']} MB exceeded"}
        except BaseException as exc:  # noqa: BLE001 - hostile objects (a __float__ that raises, ...)
            reply = {"ok": False, "kind": "crash", "message": f"{op}() result misbehaved: {type(exc).__name__}: {exc}"}
        if not reply.get("ok"):
            reply["message"] = _message(reply["message"], cfg["max_message_chars"])
        reply["id"] = msg.get("id")
        try:
            send(reply)
        except (TypeError, ValueError) as exc:
            send({"id": msg.get("id"), "ok": False, "kind": "protocol_violation",
                  "message": _message(f"result cannot be serialised: {exc}", cfg["max_message_chars"])})


# --------------------------------------------------------------------------- fork server


def _child(req_fd, rep_fd, inherited_sockets, server_only_modules):
    """In the forked child: become a fresh worker on the given pipes. Never returns."""
    code = 70
    try:
        for sock in inherited_sockets:
            sock.detach()  # the fds are closed below; the objects must never close reused numbers
        for name in server_only_modules:  # socket, select...: not offered to environments
            sys.modules.pop(name, None)
        os.dup2(req_fd, 0)
        os.dup2(rep_fd, 1)
        os.closerange(3, 1 << 20)  # the control socket, other children's status sockets and pidfds
        os.setsid()
        _set_name(b"envduels-env")
        sys.setrecursionlimit(2000)
        serve(forked=True)
        code = 0
    except BaseException:  # noqa: BLE001 - nothing to report to: the parent sees the exit
        code = 71
    finally:
        os._exit(code)


def _set_name(name):
    import ctypes

    _libc().prctl(PR_SET_NAME, ctypes.c_char_p(name), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))


def fork_server(ctl_fd):
    """Fork one confined worker per request on the control socket; reap and report them."""
    for name in PRELOADED_MODULES + CONFINE_MODULES:
        __import__(name)
    baseline = set(sys.modules)
    import select
    import signal
    import socket

    _libc()
    # Imported for the server's own use: children forget them, so that environments see
    # the same modules as in a freshly started worker.
    server_only = sorted(set(sys.modules) - baseline)
    _set_name(b"envduels-zygote")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    ctl = socket.socket(fileno=ctl_fd)
    children = {}  # pidfd -> (pid, status socket)
    poller = select.poll()
    poller.register(ctl.fileno(), select.POLLIN)

    def kill_all():
        for pidfd in children:
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            except OSError:
                pass

    while True:
        for fd, _ in poller.poll():
            if fd == ctl.fileno():
                try:
                    msg, fds, _, _ = socket.recv_fds(ctl, 64, 3)
                except OSError:
                    msg, fds = b"", []
                if not msg:  # the orchestrator closed the socket or died: take the children with us
                    kill_all()
                    os._exit(0)
                if len(fds) != 3:
                    for extra in fds:
                        os.close(extra)
                    continue
                req_fd, rep_fd, status_fd = fds
                try:
                    pid = os.fork()
                except OSError:  # no memory or pids left: the parent sees the status socket close
                    for fd in fds:
                        os.close(fd)
                    continue
                if pid == 0:
                    _child(req_fd, rep_fd, [ctl] + [s for _, s in children.values()], server_only)
                os.close(req_fd)
                os.close(rep_fd)
                status = socket.socket(fileno=status_fd)
                try:
                    pidfd = os.pidfd_open(pid)
                except OSError:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    status.close()
                    continue
                try:
                    socket.send_fds(status, [f"P {pid}".encode()], [pidfd])
                except OSError:
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                children[pidfd] = (pid, status)
                poller.register(pidfd, select.POLLIN)
            else:  # a child exited (it is a zombie until wait4, so its pid cannot be reused yet)
                pid, status = children.pop(fd)
                poller.unregister(fd)
                try:
                    os.killpg(pid, signal.SIGKILL)  # anything it forked while privileged
                except OSError:
                    pass
                _, wstatus, usage = os.wait4(pid, 0)
                try:
                    status.send(f"X {wstatus} {usage.ru_utime + usage.ru_stime:.3f} {usage.ru_maxrss}".encode())
                except OSError:
                    pass
                status.close()
                os.close(fd)


if __name__ == "__main__":
    sys.setrecursionlimit(2000)
    if len(sys.argv) == 3 and sys.argv[1] == "--fork-server":
        fork_server(int(sys.argv[2]))
    else:
        serve()
