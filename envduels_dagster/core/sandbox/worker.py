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
CLONE_NEWPID = 0x20000000

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


def _map_as_root(uid, gid):
    """In a fresh user namespace (no root): be its root for the set-up, so that the IPC
    namespace's sysctls (owned by the namespace's root) can be written; ``_drop_to_own_ids``
    follows before any environment code runs."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)


def _drop_to_own_ids(uid, gid):
    """A nested user namespace that maps our own ids back: no capabilities over the namespaces
    set up above (their owner is the parent user namespace) and our own uid again."""
    _unshare(CLONE_NEWUSER)
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} 0 1"), ("gid_map", f"{gid} 0 1")):
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


def _isolate_filesystem(workdir, uid, tmpfs_mb, inodes, narrow=False):
    """In a fresh mount namespace: everything read-only, scratch dirs empty, workdir a private tmpfs.

    ``narrow``: only make the mounts private; ``_narrow_root`` builds the root the worker will
    see instead (the host's mounts are detached, so remounting them would be wasted time)."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    if narrow:
        return []
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
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,nr_inodes=16,mode=755")
    os.makedirs(workdir, exist_ok=True)  # inside the fresh /tmp when the workdir lives there
    owner = "" if uid is None else f",uid={uid},gid={uid}"
    _mount("tmpfs", workdir, "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmpfs_mb}m,nr_inodes={inodes},mode=700{owner}")
    return failed


def _limit_ipc(ipc_mb):
    """Cap System V IPC in the worker's own IPC namespace (its sysctls are per namespace).

    Measured (issue 20): shared memory is outside RLIMIT_AS until attached (a 512 MB
    worker raised the host's Shmem by 1.5 GB) and message queues are kernel memory
    (375 MB in 0.3 s). With shm_rmid_forced a segment dies with its last attach."""
    pages = max(1, ipc_mb * 1024 * 1024 // 4096)
    settings = (("shmmni", "8"), ("shmall", str(pages)), ("shmmax", str(pages * 4096)), ("shm_rmid_forced", "1"),
                ("msgmni", "4"), ("msgmnb", "16384"), ("msgmax", "8192"), ("sem", "32 256 32 8"))
    for name, value in settings:
        with open(f"/proc/sys/kernel/{name}", "w") as fh:
            fh.write(value)


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


def _mount_stdlib_view(lib, root=""):
    """Bind the standard library (only) read-only at STDLIB_VIEW (under ``root``, a new root
    being built) and import from there."""
    import importlib

    os.mkdir(root + STDLIB_VIEW, 0o755)
    _mount(lib, root + STDLIB_VIEW, None, MS_BIND)
    _mount(None, root + STDLIB_VIEW, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    site = os.path.join(root + STDLIB_VIEW, "site-packages")
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


# Calls refused only for some arguments (x86-64 numbers; args[0] is the first argument).
NR_PRCTL, NR_CLONE, NR_CLONE3, NR_SOCKET = 157, 56, 435, 41
# Namespace flags of clone(): with RLIMIT_NPROC=0 a clone fails anyway, but the filter
# must not depend on it (issue 20). clone3 passes its flags in memory the filter cannot
# read: it gets ENOSYS, on which the C library falls back to clone (what container
# runtimes do).
CLONE_NAMESPACE_FLAGS = 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x00020000
# Socket families an environment may create: internet sockets find no network in the
# worker's network namespace (and the tests prove it); a unix socket could reach a
# world-writable socket of the host (the network namespace does not hide the filesystem).
ALLOWED_SOCKET_FAMILIES = (2, 10)  # AF_INET, AF_INET6


def seccomp_program():
    """The filter as (code, jt, jf, k) instructions."""
    ret_allow, ret_eperm, ret_enosys = 0x7FFF0000, 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
    ld_w_abs, jeq_k, jge_k, jset_k, ret_k = 0x20, 0x15, 0x35, 0x45, 0x06
    audit_arch_x86_64 = 0xC000003E
    arg0 = 16  # offsetof(struct seccomp_data, args[0]), its low 32 bits on little-endian
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
    prog += [(jeq_k, 0, 1, NR_CLONE3), (ret_k, 0, 0, ret_enosys)]
    # Each block below loads an argument (A is lost), so it ends with its own verdict.
    prog += [(jeq_k, 0, 4, NR_PRCTL), (ld_w_abs, 0, 0, arg0),
             (jeq_k, 0, 1, PR_SET_PDEATHSIG), (ret_k, 0, 0, ret_eperm), (ret_k, 0, 0, ret_allow)]
    prog += [(jeq_k, 0, 4, NR_CLONE), (ld_w_abs, 0, 0, arg0),
             (jset_k, 0, 1, CLONE_NAMESPACE_FLAGS), (ret_k, 0, 0, ret_eperm), (ret_k, 0, 0, ret_allow)]
    families = [(jeq_k, len(ALLOWED_SOCKET_FAMILIES) - i, 0, fam) for i, fam in enumerate(ALLOWED_SOCKET_FAMILIES)]
    prog += [(jeq_k, 0, 3 + len(families), NR_SOCKET), (ld_w_abs, 0, 0, arg0), *families,
             (ret_k, 0, 0, ret_eperm), (ret_k, 0, 0, ret_allow)]
    prog.append((ret_k, 0, 0, ret_allow))
    return prog


# What a narrowed root holds of the host (read-only): the system's programs and shared
# libraries (C extension modules of the standard library link against them) and a few
# devices; /etc, /home, /root, /srv, /opt, /var, /run and the repository are not there.
ROOT_BINDS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
ROOT_DEVICES = ("null", "zero", "full", "random", "urandom")
NEW_ROOT = "/tmp"  # a tmpfs mounted over the host's /tmp in the worker's namespace; it becomes "/"
# In the narrowed root these are links to its one root-owned scratch tmpfs, /tmp: one mount
# instead of one each (measured: each mount, namespace and pivot step adds start time).
SCRATCH_LINKS = ("/var/tmp", "/dev/shm")


def _narrow_root(workdir, uid, tmpfs_mb, inodes, pid_ns):
    """In the worker's mount namespace: pivot into a fresh root holding only ROOT_BINDS, the
    standard library view, ROOT_DEVICES, a /proc, the scratch dirs and the workdir."""
    new = NEW_ROOT
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=256k,nr_inodes=512,mode=755")
    ro = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
    for name in ROOT_BINDS:
        src = "/" + name
        if os.path.islink(src):
            os.symlink(os.readlink(src), new + src)
        elif os.path.isdir(src):
            os.mkdir(new + src, 0o755)
            _mount(src, new + src, None, MS_BIND | MS_REC)
            _mount(None, new + src, None, ro)
    os.mkdir(new + "/dev", 0o755)
    for name in ROOT_DEVICES:
        if os.path.exists("/dev/" + name):
            os.close(os.open(new + "/dev/" + name, os.O_CREAT | os.O_WRONLY, 0o666))
            _mount("/dev/" + name, new + "/dev/" + name, None, MS_BIND)
    os.mkdir(new + "/proc", 0o555)
    if pid_ns:
        # hidepid: the init (root) stays invisible too -- it lives in the host's network
        # namespace, and /proc/1/net/tcp listed the host's sockets (measured).
        try:
            _mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible")
        except OSError:  # kernels before 5.8 know only the numeric form
            _mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2")
    else:  # no pid namespace: the host's /proc, as without a narrowed root
        _mount("/proc", new + "/proc", None, MS_BIND | MS_REC)
        # Without root, the IPC namespace's sysctls belong to our own uid (its root): read-only
        # here, so that environment code cannot raise the limits _limit_ipc wrote.
        _mount(new + "/proc/sys", new + "/proc/sys", None, MS_BIND | MS_REC)
        _mount(None, new + "/proc/sys", None, ro)
    os.mkdir(new + "/tmp", 0o755)
    _mount("tmpfs", new + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,nr_inodes=16,mode=755")
    for path in SCRATCH_LINKS:
        os.makedirs(os.path.dirname(new + path), 0o755, exist_ok=True)
        os.symlink("/tmp", new + path)
    return new


def _pivot(new, workdir, uid, tmpfs_mb, inodes):
    """Enter ``new`` as "/" (the old root detached: nothing of it stays reachable), read-only."""
    os.makedirs(new + workdir, 0o755, exist_ok=True)
    owner = "" if uid is None else f",uid={uid},gid={uid}"
    _mount("tmpfs", new + workdir, "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmpfs_mb}m,nr_inodes={inodes},mode=700{owner}")
    os.chdir(new)
    _check(_libc().syscall(155, b".", b"."), "pivot_root")  # pivot_root(".", "."): old root on top
    _check(_libc().umount2(b".", 2), "umount the old root")  # MNT_DETACH
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


_CGROUP_STATUS = None  # probed once by the fork server; its children inherit it


def cgroup_v2_status():
    """(False, why) -- no cgroup v2 with memory and pids controllers can be delegated to workers here.

    Why only a probe: a cgroup per worker (memory.max counting shared memory, tmpfs and
    kernel memory; pids.max; cgroup.kill) needs a cgroup v2 hierarchy owning the memory and
    pids controllers with a subtree we may write; the machine this was built on mounts them
    as cgroup v1 (hybrid mode) and a v2 layer could not be run or tested there. Until it
    can, the worker's own IPC namespace limits and the tmpfs inode cap stand in (see
    docs/THREAT-MODEL.md), and this says why in the start-up report."""
    try:
        with open("/proc/self/mounts") as fh:
            points = [line.split()[1] for line in fh if line.split()[2] == "cgroup2"]
        with open("/proc/self/cgroup") as fh:
            own = [line.strip().split("::", 1)[1] for line in fh if line.startswith("0::")]
    except OSError as exc:
        return False, f"cannot read the cgroup mounts: {exc}"
    if not points:
        return False, "no cgroup v2 hierarchy is mounted"
    for point in points:
        base = point.rstrip("/") + (own[0] if own else "/")
        try:
            with open(os.path.join(base, "cgroup.controllers")) as fh:
                controllers = fh.read().split()
        except OSError:
            continue
        missing = [c for c in ("memory", "pids") if c not in controllers]
        if missing:
            return False, (f"cgroup v2 at {point} offers {' '.join(controllers) or 'no controllers'}; "
                          f"{' and '.join(missing)} are bound to cgroup v1 (hybrid mode)")
        return False, f"cgroup v2 at {base} offers memory and pids, but per-worker cgroups are not wired in yet"
    return False, "the cgroup v2 hierarchy does not show this process's cgroup"


def _install_seccomp():
    import ctypes
    import struct

    prog = seccomp_program()
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

    parent = os.getppid()
    root = os.getuid() == 0
    wrapped = bool(cfg.get("wrapped"))  # bubblewrap already made the namespaces
    uid = cfg.get("uid") if root else None
    applied = {"network_isolated": wrapped, "filesystem_isolated": wrapped, "pid_isolated": wrapped,
               "uid": os.getuid(),
               "seccomp": False, "fork_server": forked, "wrapper": cfg.get("wrapper")}
    if not wrapped:
        want_net, want_fs = bool(cfg.get("isolate_network")), bool(cfg.get("isolate_filesystem"))
        flags = (CLONE_NEWNET if want_net else 0) | (CLONE_NEWNS | CLONE_NEWIPC if want_fs else 0)
        user = 0 if root else CLONE_NEWUSER
        outer_ids = (os.getuid(), os.getgid())
        as_root = bool(user and want_fs)  # see _map_as_root
        if flags:
            try:
                _unshare(flags | user)
                if as_root:
                    _map_as_root(*outer_ids)
                elif user:
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
                as_root = False
        if applied["filesystem_isolated"]:
            try:
                narrowing = bool(cfg.get("narrow_filesystem")) and not wrapped
                failed = _isolate_filesystem(cfg["workdir"], uid, cfg.get("tmpfs_mb", 16), cfg["workdir_inodes"],
                                             narrowing)
                applied["workdir_inodes"] = cfg["workdir_inodes"]
                if failed:
                    applied["read_only_failed"] = failed
            except OSError as exc:
                applied["filesystem_isolated"] = False
                applied["filesystem_error"] = str(exc)
            if forked and os.getpid() == 2:  # pid 2 of its own pid namespace, under the fork server's init
                try:
                    applied["pid"] = int(os.readlink("/proc/self"))  # the host's /proc: the host's pid
                    # A /proc of this pid namespace: other processes, their command lines and
                    # /proc/<pid>/net (the host's sockets) are out of sight (issue 20). A narrowed
                    # root mounts its own below.
                    if not narrowing:
                        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible")
                    applied["pid_isolated"] = True
                except OSError as exc:
                    applied["pid_error"] = str(exc)
            try:
                _limit_ipc(cfg["ipc_mb"])
                applied["ipc_limits"] = True
            except OSError as exc:
                applied["ipc_limits"] = False
                applied["ipc_limits_error"] = str(exc)
    applied["stdlib"] = "host"  # the worker's own uid reads the library where it is
    narrow = applied["filesystem_isolated"] and not wrapped and cfg.get("narrow_filesystem")
    new_root = ""
    if narrow:
        try:
            new_root = _narrow_root(cfg["workdir"], uid, cfg["tmpfs_mb"], cfg["workdir_inodes"],
                                    applied.get("pid_isolated"))
        except OSError as exc:
            applied["narrow_error"] = str(exc)
            narrow = False
    if narrow or (uid is not None and not _readable_by_anyone(_stdlib_dir())):
        applied["stdlib"] = "preloaded"  # only PRELOADED_MODULES, unless the view below works
        if applied["filesystem_isolated"] and not wrapped:
            try:
                _mount_stdlib_view(_stdlib_dir(), new_root)
                applied["stdlib"] = "view"
            except OSError as exc:
                applied["stdlib_error"] = str(exc)
    applied["cgroup"], applied["cgroup_error"] = _CGROUP_STATUS or cgroup_v2_status()
    applied["filesystem_narrowed"] = False
    if narrow:
        try:
            _pivot(new_root, cfg["workdir"], uid, cfg["tmpfs_mb"], cfg["workdir_inodes"])
            applied["filesystem_narrowed"] = True
        except OSError as exc:  # the parent refuses to go on (workdir_error below, or the check)
            applied["narrow_error"] = str(exc)
    if not wrapped and as_root:
        try:
            _drop_to_own_ids(*outer_ids)
        except OSError as exc:  # still root of the namespaces: the parent must not go on
            applied["workdir_error"] = f"cannot leave the set-up user namespace: {exc}"
    try:
        os.chdir(cfg["workdir"])
    except OSError as exc:  # e.g. a mount namespace set up halfway: the parent refuses to go on
        applied["workdir_error"] = str(exc)
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        applied["uid"] = os.getuid()
    # Die with the parent -- the fork server, or the orchestrator for a fresh interpreter
    # (setuid clears this, hence here). The seccomp filter below refuses to change it again
    # (measured: a worker that cleared it outlived SIGKILL of the orchestrator's process
    # group, re-parented to pid 1, holding its memory). A parent already gone: stop here.
    _prctl(PR_SET_PDEATHSIG, 9)
    if os.getppid() != parent:
        os._exit(72)
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
        text = json.dumps(info, default=repr)
        if len(text) > cfg["max_info_bytes"]:
            raise ProtocolViolation(f"{where} returned an info dict of {len(text)} bytes as JSON; "
                                    f"limit is {cfg['max_info_bytes']}")
        clean = json.loads(text)
    except RecursionError:
        raise ProtocolViolation(f"{where} returned an info dict nested too deeply") from None
    except (TypeError, ValueError) as exc:
        raise ProtocolViolation(f"{where} returned an info dict that cannot be serialised: {exc}") from None
    limit = cfg["max_info_depth"]
    if _depth(clean, limit) > limit:
        raise ProtocolViolation(f"{where} returned an info dict nested deeper than {limit} levels")
    stack, count, most = [clean], 0, cfg["max_info_items"]
    while stack and count <= most:
        item = stack.pop()
        count += 1
        stack.extend(item.values() if isinstance(item, dict) else item if isinstance(item, list) else ())
    if count > most:
        raise ProtocolViolation(f"{where} returned an info dict of more than {most} values")
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


def _init(req_fd, rep_fd, relay_fd, inherited_sockets, server_only_modules):
    """Pid 1 of a worker's own pid namespace: fork the worker (pid 2), wait, relay its status.

    Why not the worker itself as pid 1: init of a namespace ignores every signal it has no
    handler for, even SIGKILL from itself, so an environment could not die of its own
    signals (and the sandbox would misreport them). This process stays root and trusted; it
    runs no environment code. When it dies (the parent's pidfd kill, the fork server's
    death) the kernel kills everything in the namespace: nothing can outlive it there."""
    code = 70
    try:
        for sock in inherited_sockets:
            sock.detach()
        os.setsid()
        pid = os.fork()
        if pid == 0:
            os.close(relay_fd)
            _child(req_fd, rep_fd, [], server_only_modules)
        os.close(req_fd)
        os.close(rep_fd)
        os.closerange(3, relay_fd)
        os.closerange(relay_fd + 1, 1 << 20)
        _set_name(b"envduels-init")
        _prctl(PR_SET_PDEATHSIG, 9)  # with the fork server, the whole namespace goes
        _, wstatus = os.waitpid(pid, 0)
        os.write(relay_fd, wstatus.to_bytes(4, "little"))
        code = 0
    except BaseException:  # noqa: BLE001 - the fork server sees the exit
        code = 71
    finally:
        os._exit(code)


def _set_name(name):
    import ctypes

    _libc().prctl(PR_SET_NAME, ctypes.c_char_p(name), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))


WORKDIR_PREFIX = "envduels-sbx-"


def _own_workdir(msg):
    """The working directory named in a spawn request, if it is one of ours (else None)."""
    path = os.fsdecode(msg[len(b"spawn "):]) if msg.startswith(b"spawn ") else ""
    if os.path.isabs(path) and os.path.basename(path).startswith(WORKDIR_PREFIX):
        return path
    return None


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
    global _CGROUP_STATUS
    _CGROUP_STATUS = cgroup_v2_status()
    try:  # to restore our own pid namespace for children after each unshare (see spawn below)
        own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY)
    except OSError:
        own_pid_ns = None
    children = {}  # pidfd -> (pid, status socket, working directory)
    poller = select.poll()
    poller.register(ctl.fileno(), select.POLLIN)

    def kill_all():
        """The orchestrator is gone: kill, reap, and remove the working directories it would have."""
        import shutil

        for pidfd in children:
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            except OSError:
                pass
        for pid, _, workdir, _ in children.values():
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
            if workdir:
                shutil.rmtree(workdir, ignore_errors=True)

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
                workdir = _own_workdir(msg)
                relay_r, relay_w = os.pipe()
                # The child becomes pid 1 of a fresh pid namespace: unshare(CLONE_NEWPID) sets the
                # namespace of our *next* child; setns back so that the one after gets its own.
                new_pid_ns = own_pid_ns is not None and _libc().unshare(CLONE_NEWPID) == 0
                try:
                    pid = os.fork()
                except OSError:  # no memory or pids left: the parent sees the status socket close
                    pid = None
                finally:
                    if new_pid_ns and _libc().setns(own_pid_ns, CLONE_NEWPID) != 0:
                        own_pid_ns = None  # cannot go back: no more pid namespaces, the rest works
                if pid is None:
                    for fd in (*fds, relay_r, relay_w):
                        os.close(fd)
                    continue
                inherited = [ctl] + [s for _, s, _, _ in children.values()]
                if pid == 0:
                    if new_pid_ns:
                        _init(req_fd, rep_fd, relay_w, inherited, server_only)
                    os.close(relay_w)
                    _child(req_fd, rep_fd, inherited, server_only)
                os.close(relay_w)
                os.close(req_fd)
                os.close(rep_fd)
                status = socket.socket(fileno=status_fd)
                try:
                    pidfd = os.pidfd_open(pid)
                except OSError:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    status.close()
                    os.close(relay_r)
                    continue
                try:
                    socket.send_fds(status, [f"P {pid}".encode()], [pidfd])
                except OSError:
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                children[pidfd] = (pid, status, workdir, relay_r)
                poller.register(pidfd, select.POLLIN)
            else:  # a child exited (it is a zombie until wait4, so its pid cannot be reused yet)
                pid, status, _, relay_r = children.pop(fd)
                poller.unregister(fd)
                try:
                    os.killpg(pid, signal.SIGKILL)  # anything it forked while privileged
                except OSError:
                    pass
                _, wstatus, usage = os.wait4(pid, 0)  # the init's usage includes the worker it reaped
                relayed = os.read(relay_r, 4)  # the worker's own status, when an init relayed it
                os.close(relay_r)
                if len(relayed) == 4:
                    wstatus = int.from_bytes(relayed, "little")
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
