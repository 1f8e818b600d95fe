"""What the sandbox says when the machine refuses it namespaces: the refusal, and the fix a deployment needs.

Why a message of its own: in a default Docker or Kubernetes pod the kernel (through the runtime's
seccomp and AppArmor profiles) refuses ``unshare()``, the sandbox fails closed, and every pair fails
with this text. It is read by whoever deploys, in a run's error: it must say what to grant, not only
what failed. The options are those of docs/DEPLOY.md, section "The sandbox in a container".
"""

from __future__ import annotations

import os

DEPLOY_SECTION = 'docs/DEPLOY.md, "5. The sandbox in a container"'


def in_container() -> bool:
    """Best effort: Docker's marker file, a Kubernetes pod's environment, or a container cgroup path."""
    if os.path.exists("/.dockerenv") or os.environ.get("KUBERNETES_SERVICE_HOST"):
        return True
    try:
        with open("/proc/1/cgroup") as fh:
            text = fh.read()
    except OSError:
        return False
    return any(marker in text for marker in ("docker", "kubepods", "containerd", "libpod"))


def namespaces_refused(reason: str) -> bool:
    """Whether the worker's error is the kernel refusing a namespace (not some other set-up failure)."""
    text = reason.lower()
    return any(s in text for s in ("unshare", "operation not permitted", "permission denied", "no space left",
                                   "invalid argument", "eperm", "enospc"))


def namespace_fix() -> str:
    """The deployment fix for a refused ``unshare()``."""
    where = "this container" if in_container() else "this machine"
    return (f"{where} does not let the sandbox create the user/mount/network/IPC namespaces it confines "
            "model-written code in, so that code will not run (the sandbox fails closed). Fix, one of: "
            "(1) allow unprivileged user namespaces on the node (user.max_user_namespaces > 0; Debian: "
            "kernel.unprivileged_userns_clone=1) and give the run pods a seccomp profile that allows unshare, "
            "setns, mount, umount2 and pivot_root plus an AppArmor profile that allows mount "
            "(Kubernetes securityContext.seccompProfile / appArmorProfile type Localhost, or Unconfined; "
            "Docker --security-opt seccomp=<profile> --security-opt apparmor=<profile>), or user-namespaced "
            "pods (hostUsers: false); (2) add CAP_SYS_ADMIN on a dedicated node pool "
            "(securityContext.capabilities.add: [SYS_ADMIN]; docker run --cap-add SYS_ADMIN); "
            "(3) run the pods under gVisor (runtimeClassName: gvisor); the bubblewrap layer "
            "(launcher 'bwrap') needs the same user-namespace permission as (1). "
            f"Check a node with tests/core/sandbox/test_sandbox_conformance.py. See {DEPLOY_SECTION}.")


def refusal_message(what: str, reason: str, knob: str) -> str:
    """``cannot <what> (<reason>)``, then the fix when namespaces were refused, else the old hint."""
    head = f"cannot {what} ({reason})"
    if namespaces_refused(reason):
        return f"{head}: {namespace_fix()} (Or set {knob}=False knowingly.)"
    return f"{head}; run as root or enable user namespaces, or set {knob}=False knowingly ({DEPLOY_SECTION})"
