"""Worker that runs untrusted environment code. Executed as a script, never imported.

It confines itself *before* reading any untrusted code: new network namespace,
unprivileged uid/gid, resource limits, stdio detached from the protocol pipe.
Only the standard library may be used here (it starts with ``python -I -S``).
Protocol: one JSON object per line in both directions over inherited fds.
"""

import errno
import json
import math
import os
import resource
import sys

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000


def _unshare(flags):
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


# Imported before privileges drop: the unprivileged uid may not be able to read the
# interpreter's library directory, so environments get this curated standard library.
# Every module here is paid for at each worker start (benchmarks/sandbox.py): statistics
# and fractions (which pull in decimal, ~5 ms of CPU per start) are left out because text
# games rarely need them and no simulated family uses them; dataclasses (~9 ms) and typing
# stay because model-written environments commonly import them.
PRELOADED_MODULES = (
    "bisect", "collections", "copy", "dataclasses", "enum", "functools", "hashlib",
    "heapq", "itertools", "json", "math", "operator", "random", "re", "string",
    "textwrap", "typing",
)


def confine(cfg):
    """Apply the isolation the parent asked for; return what was actually applied."""
    for name in PRELOADED_MODULES:
        __import__(name)
    applied = {"network_isolated": False, "uid": os.getuid()}
    if cfg.get("isolate_network"):
        try:
            if os.getuid() == 0:
                _unshare(CLONE_NEWNET)
            else:
                _unshare(CLONE_NEWUSER | CLONE_NEWNET)
            applied["network_isolated"] = True
        except OSError as exc:
            applied["network_error"] = str(exc)
    os.chdir(cfg["workdir"])
    uid = cfg.get("uid")
    if uid is not None and os.getuid() == 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        applied["uid"] = os.getuid()
    mb = 1024 * 1024
    # (soft, hard). CPU: with soft == hard the kernel sends SIGKILL, not SIGXCPU, and the
    # parent could not tell a CPU overrun from any other kill; one second of slack makes
    # SIGXCPU (default action: terminate) arrive first, SIGKILL only if it is ignored.
    limits = [
        (resource.RLIMIT_AS, cfg["memory_mb"] * mb, cfg["memory_mb"] * mb),
        (resource.RLIMIT_CPU, cfg["cpu_seconds"], cfg["cpu_seconds"] + 1),
        (resource.RLIMIT_NOFILE, cfg["max_open_files"], cfg["max_open_files"]),
        (resource.RLIMIT_FSIZE, cfg["max_file_size_mb"] * mb, cfg["max_file_size_mb"] * mb),
        (resource.RLIMIT_NPROC, 0, 0),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    for which, soft, hard in limits:
        resource.setrlimit(which, (soft, hard))
    return applied


class ProtocolViolation(Exception):
    """The environment returned something the protocol does not allow."""


def _check_obs(obs, where, cfg):
    if not isinstance(obs, str):
        raise ProtocolViolation(f"{where} returned a {type(obs).__name__} observation; expected str")
    if len(obs) > cfg["max_observation_chars"]:
        raise ProtocolViolation(
            f"{where} returned an observation of {len(obs)} chars; limit is {cfg['max_observation_chars']}"
        )


def _check_info(info, where):
    if not isinstance(info, dict):
        raise ProtocolViolation(f"{where} returned a {type(info).__name__} info; expected dict")
    try:
        return json.loads(json.dumps(info, default=repr))
    except (TypeError, ValueError) as exc:
        raise ProtocolViolation(f"{where} returned an info dict that cannot be serialised: {exc}")


class Host:
    def __init__(self, cfg):
        self.cfg = cfg
        self.cls = None
        self.env = None

    def load(self, msg):
        namespace = {"__name__": "envduels_env"}
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
        try:
            return self.cls(max_turns=self.max_turns)
        except MemoryError:
            raise
        except BaseException as exc:  # noqa: BLE001
            raise _EnvCrash(f"constructor raised {type(exc).__name__}: {exc}")

    def reset(self, msg):
        self.env = self._fresh()
        out = _call(self.env.reset, seed=msg["seed"])
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ProtocolViolation(f"reset() must return (observation, info); got {_shape(out)}")
        obs, info = out
        _check_obs(obs, "reset()", self.cfg)
        return {"ok": True, "observation": obs, "info": _check_info(info, "reset()")}

    def step(self, msg):
        if self.env is None:
            raise ProtocolViolation("step() before reset()")
        out = _call(self.env.step, msg["action"])
        if not (isinstance(out, tuple) and len(out) == 5):
            raise ProtocolViolation(
                f"step() must return (observation, reward, terminated, truncated, info); got {_shape(out)}"
            )
        obs, reward, terminated, truncated, info = out
        _check_obs(obs, "step()", self.cfg)
        if isinstance(reward, bool) or not isinstance(reward, (int, float)):
            raise ProtocolViolation(f"step() returned a {type(reward).__name__} reward; expected a number")
        if not math.isfinite(reward):
            raise ProtocolViolation(f"step() returned a non-finite reward ({reward})")
        for name, flag in (("terminated", terminated), ("truncated", truncated)):
            if not isinstance(flag, bool):
                raise ProtocolViolation(f"step() returned a {type(flag).__name__} {name}; expected bool")
        return {
            "ok": True,
            "observation": obs,
            "reward": float(reward),
            "terminated": terminated,
            "truncated": truncated,
            "info": _check_info(info, "step()"),
        }

    def reference(self, msg):
        env = self._fresh()
        fn = getattr(env, "reference_actions", None)
        if fn is None:
            return {"ok": True, "actions": None}
        actions = _call(fn, msg["seed"])
        if not isinstance(actions, (list, tuple)) or not all(isinstance(a, str) for a in actions):
            raise ProtocolViolation("reference_actions() must return a list of strings")
        if len(actions) > 10_000:
            raise ProtocolViolation("reference_actions() returned more than 10000 actions")
        return {"ok": True, "actions": list(actions)}


class _EnvCrash(Exception):
    pass


class _LimitHit(Exception):
    """Environment code ran into one of the sandbox's rlimits (reported as resource_limit)."""


# rlimits that surface as OSError inside the environment rather than as a signal
# (Python ignores SIGXFSZ, so an oversized write fails with EFBIG).
_LIMIT_ERRNOS = {errno.EFBIG: "file size limit", errno.EMFILE: "open files limit"}


def _shape(value):
    if isinstance(value, tuple):
        return f"a tuple of length {len(value)}"
    return f"a {type(value).__name__}"


def _call(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except (MemoryError, ProtocolViolation):
        raise
    except RecursionError as exc:
        raise _EnvCrash(f"recursion limit exceeded: {exc}")
    except OSError as exc:
        where = f"{getattr(fn, '__name__', 'call')}()"
        if exc.errno in _LIMIT_ERRNOS:
            raise _LimitHit(f"{_LIMIT_ERRNOS[exc.errno]} exceeded in {where}: {exc}")
        raise _EnvCrash(f"{where} raised {type(exc).__name__}: {exc}")
    except BaseException as exc:  # noqa: BLE001 - SystemExit/KeyboardInterrupt from env code are crashes too
        raise _EnvCrash(f"{getattr(fn, '__name__', 'call')}() raised {type(exc).__name__}: {exc}")


def main():
    # Keep the protocol pipes on private fds; stdio of untrusted code goes nowhere.
    reader = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)

    def send(obj):
        proto_out.write(json.dumps(obj).encode() + b"\n")

    cfg = json.loads(reader.readline())
    applied = confine(cfg)
    send({"ok": True, "ready": True, **applied})
    host = Host(cfg)
    handlers = {"load": host.load, "reset": host.reset, "step": host.step, "reference": host.reference}
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
        except ProtocolViolation as exc:
            reply = {"ok": False, "kind": "protocol_violation", "message": str(exc)}
        except _EnvCrash as exc:
            reply = {"ok": False, "kind": "crash", "message": str(exc)}
        except _LimitHit as exc:
            reply = {"ok": False, "kind": "resource_limit", "message": str(exc)}
        except MemoryError:
            reply = {"ok": False, "kind": "resource_limit", "message": f"memory limit of {cfg['memory_mb']} MB exceeded"}
        try:
            send(reply)
        except (TypeError, ValueError) as exc:
            send({"ok": False, "kind": "protocol_violation", "message": f"result cannot be serialised: {exc}"})


if __name__ == "__main__":
    sys.setrecursionlimit(2000)
    main()
