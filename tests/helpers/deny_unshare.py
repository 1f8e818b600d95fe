"""Start one sandboxed environment with ``unshare()`` refused, as a default container refuses it.

    python -m tests.helpers.deny_unshare <launcher>

Installs a seccomp filter on this process (inherited by every worker and fork server it starts) that
fails ``unshare`` with EPERM -- what Docker's and containerd's default profiles do to a process
without CAP_SYS_ADMIN -- then starts a sandbox through the real code and prints the SandboxError's
kind and message. Nothing of the sandbox is mocked: the worker's own namespace set-up meets the refusal.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import struct
import sys

NR_UNSHARE_X86_64, AUDIT_ARCH_X86_64 = 272, 0xC000003E


def deny_unshare() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2
    ld_w_abs, jeq_k, ret_k = 0x20, 0x15, 0x06
    allow, eperm = 0x7FFF0000, 0x00050000 | errno.EPERM
    prog = [(ld_w_abs, 0, 0, 4), (jeq_k, 1, 0, AUDIT_ARCH_X86_64), (ret_k, 0, 0, allow),
            (ld_w_abs, 0, 0, 0), (jeq_k, 0, 1, NR_UNSHARE_X86_64), (ret_k, 0, 0, eperm), (ret_k, 0, 0, allow)]
    raw = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog), ctypes.addressof(buf))
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0 or libc.prctl(
            pr_set_seccomp, ctypes.c_ulong(seccomp_mode_filter), ctypes.byref(fprog), ctypes.c_ulong(0),
            ctypes.c_ulong(0)) != 0:
        raise SystemExit(f"cannot install the seccomp filter: {ctypes.get_errno()}")


async def start(launcher: str) -> None:
    from envduels_dagster.core.sandbox.limits import SandboxError
    from envduels_dagster.core.sandbox.self_check import Sandboxes, game

    try:
        async with Sandboxes(launcher)(game()) as env:
            await env.reset(0)
    except SandboxError as exc:
        print(f"KIND {exc.kind}\nMESSAGE {exc}", flush=True)
        return
    print("STARTED", flush=True)


if __name__ == "__main__":
    deny_unshare()
    asyncio.run(start(sys.argv[1]))
