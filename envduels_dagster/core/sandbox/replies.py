"""Judge what comes back from a worker: reply contents, error replies, and how it died.

Why on this side: the worker checks results too (with friendlier messages), but
environment code runs in the worker's process and can patch those checks or write
lines of its own. These are the checks that count; a reply that passes them carries
nothing the environment could not have returned honestly.
"""

from __future__ import annotations

import math
import signal
from collections.abc import Callable
from typing import Any

from envduels_dagster.core.sandbox.limits import (
    MAX_INFO_DEPTH,
    MAX_MESSAGE_CHARS,
    MAX_REFERENCE_ACTIONS,
    WORKER_KINDS,
    SandboxError,
    SandboxLimits,
)

Check = Callable[[dict, SandboxLimits], "str | None"]


def _text_problem(value: Any, what: str, limit: int) -> str | None:
    if not isinstance(value, str):
        return f"{what} is a {type(value).__name__}, not a string"
    if len(value) > limit:
        return f"{what} has {len(value)} chars; limit is {limit}"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return f"{what} is not valid Unicode"
    return None


def json_depth(value: Any, limit: int) -> int:
    """Nesting depth of a decoded JSON value, iteratively; stops counting past ``limit``.

    The worker computes the same thing (it cannot import this module); the parent
    re-checks every reply independently anyway."""
    stack, deepest = [(value, 1)], 0
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            if level > limit:
                return level
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def json_items(value: Any, limit: int) -> int:
    """Values in a decoded JSON value (containers included), iteratively; stops counting past ``limit``."""
    stack, count = [value], 0
    while stack and count <= limit:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def _info_problem(info: Any, lim: SandboxLimits) -> str | None:
    if not isinstance(info, dict):
        return f"info is a {type(info).__name__}, not a dict"
    if json_depth(info, MAX_INFO_DEPTH) > MAX_INFO_DEPTH:
        return f"info is nested deeper than {MAX_INFO_DEPTH} levels"
    if json_items(info, lim.max_info_items) > lim.max_info_items:
        return f"info holds more than {lim.max_info_items} values"
    return None


def check_hello(r: dict, lim: SandboxLimits) -> str | None:
    if not isinstance(r.get("network_isolated"), bool) or not isinstance(r.get("pid"), int):
        return "the worker's greeting lacks its isolation report"
    return None


def check_load(r: dict, lim: SandboxLimits) -> str | None:
    return None if isinstance(r.get("has_reference"), bool) else "has_reference is not a bool"


def check_reset(r: dict, lim: SandboxLimits) -> str | None:
    observation = _text_problem(r.get("observation"), "the observation", lim.max_observation_chars)
    return observation or _info_problem(r.get("info"), lim)


def check_step(r: dict, lim: SandboxLimits) -> str | None:
    problem = check_reset(r, lim)
    if problem:
        return problem
    reward = r.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        return f"the reward is a {type(reward).__name__}, not a number"
    try:
        finite = math.isfinite(reward)
    except OverflowError:  # a huge integer literal in a forged line
        return "the reward is too large for a float"
    if not finite:
        return f"the reward is not finite ({reward})"
    for name in ("terminated", "truncated"):
        if not isinstance(r.get(name), bool):
            return f"{name} is not a bool"
    return None


def check_reference(r: dict, lim: SandboxLimits) -> str | None:
    actions = r.get("actions")
    if actions is None:
        return None
    if not isinstance(actions, list):
        return f"the actions are a {type(actions).__name__}, not a list"
    if len(actions) > MAX_REFERENCE_ACTIONS:
        return f"more than {MAX_REFERENCE_ACTIONS} reference actions"
    for action in actions:
        problem = _text_problem(action, "a reference action", lim.max_observation_chars)
        if problem:
            return problem
    return None


def check_ok(r: dict, lim: SandboxLimits) -> str | None:
    return None


# C0 and C1 control characters and DEL: an environment's exception text reaches terminals
# (envduels validate) and logs; ESC, BEL or CR in it could forge a "valid" line (issue 20).
_CONTROLS = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7F, 0xA0)]}


def clean_message(message: str) -> str:
    """A worker's error message made safe to print: capped, valid UTF-8, control characters escaped."""
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + f"... [{len(message) - MAX_MESSAGE_CHARS} more chars]"
    return message.encode("utf-8", "replace").decode("utf-8").translate(_CONTROLS)


def judge(reply: dict, what: str, check: Check, limits: SandboxLimits) -> tuple[SandboxError | None, bool]:
    """(the error this reply amounts to, or None; whether the worker must be killed for it).

    An error the worker reports about its environment leaves the worker running; a
    malformed error reply or a reply failing the checks means the channel is not to be
    trusted any more."""
    if reply.get("ok") is not True:
        kind, message = reply.get("kind"), reply.get("message")
        if kind not in WORKER_KINDS or not isinstance(message, str):
            return SandboxError("protocol_violation", f"{what} produced a malformed error reply"), True
        return SandboxError(kind, clean_message(message)), False
    problem = check(reply, limits)
    if problem:
        return SandboxError("protocol_violation", f"{what} produced a reply that fails the sandbox's checks: "
                                                  f"{problem}"), True
    return None, False


def death_reason(what: str, code: int | None, cpu: float | None, killed_by_us: bool,
                 limits: SandboxLimits) -> SandboxError:
    """Classify a worker that went away: exit code (negative: a signal) and CPU seconds, when known."""
    if code is None:
        return SandboxError("crash", f"worker stopped answering during {what} and its exit status is unknown")
    if code >= 0:
        return SandboxError("crash", f"worker exited with code {code} during {what}")
    sig = -code
    if sig == signal.SIGXCPU:
        return SandboxError("resource_limit", f"CPU limit of {limits.cpu_seconds} s exceeded during {what}")
    if sig == signal.SIGKILL and not killed_by_us:
        if cpu is None:
            return SandboxError("resource_limit", f"worker killed by SIGKILL during {what}: the CPU hard limit "
                                                  f"of {limits.cpu_seconds + 1} s, out of memory, or the "
                                                  "environment itself")
        if cpu >= limits.cpu_seconds - 0.05:
            return SandboxError("resource_limit", f"CPU limit of {limits.cpu_seconds} s exceeded during {what}")
        return SandboxError("crash", f"worker was killed by SIGKILL during {what} after {cpu:.2f} s of CPU, not by "
                                     "the sandbox: the environment killed itself or the kernel ran out of memory")
    if sig == signal.SIGXFSZ:
        return SandboxError("resource_limit", f"file size limit of {limits.max_file_size_mb} MB exceeded "
                                              f"during {what}")
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = f"signal {sig}"
    return SandboxError("crash", f"worker died from signal {name} during {what}")
