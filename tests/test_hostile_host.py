"""Hostile environments against the host itself (issue 20): memory outside every rlimit,
orphans, a view of the host, orchestrator amplification, false verdicts.

Each test asserts the effect *on the host* -- its memory, its process table, its
listeners, the orchestrator's own peak memory and CPU, what play shows -- measured from
this side, not only the reason the sandbox gives. The ``world`` fixture of
``test_hostile`` checks after each test that nothing outlived the run.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.test_hostile import ROOMY, game, rejected, world  # noqa: F401 - world is a fixture
from envduels_dagster.core.sandbox import SandboxedEnv, SandboxError

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
