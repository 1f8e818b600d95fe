"""Validate an environment in the sandbox before anyone plays it.

Why so strict: a broken, random or unwinnable environment poisons every
statistic computed from it. Every rejection carries a specific reason and
counts against the author's validity rate; nothing is dropped silently.
"""

from __future__ import annotations

import re

from envduels_dagster.core.protocol import EnvironmentSpec, format_action, is_success
from envduels_dagster.core.sandbox import SandboxedEnv, SandboxError, SandboxLimits

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Same inputs, same stored reason (issue 33): an environment drawing from unseeded randomness was rejected with
# one of 3-4 reasons across 8 validations (which seed showed it first, or a reference that "did not win" some
# seed), and the reason enters the next round's brief. So every determinism check looks at every seed, calls
# each thing REPEATS times (two draws from a small range often coincide; three rarely do on every seed), and
# its reason names the check, never the seed or the values the draws produced. The checks run in a fixed
# order; the first that fails is the reason.
REPEATS = 3


class Rejected(Exception):
    pass


def hint_leaks(hint: str, actions: list[str]) -> bool:
    """True when every reference action appears in the hint, in order, as whole words."""
    if not actions:
        return False
    pos = 0
    for action in actions:
        m = re.compile(rf"(?<![\w]){re.escape(action.strip())}(?![\w])").search(hint, pos)
        if m is None:
            return False
        pos = m.end()
    return True


async def validate_environment(spec: EnvironmentSpec, limits: SandboxLimits | None = None) -> EnvironmentSpec:
    """Return a copy of ``spec`` with ``valid``, ``reject_reason`` and ``winnability`` set."""
    try:
        winnability = await _check(spec, limits)
    except Rejected as exc:
        failed = str(exc).startswith("reference solution")
        return spec.model_copy(update={"valid": False, "reject_reason": str(exc),
                                       "winnability": "failed" if failed else spec.winnability})
    return spec.model_copy(update={"valid": True, "reject_reason": None, "winnability": winnability})


async def _check(spec: EnvironmentSpec, limits: SandboxLimits | None) -> str:
    if not spec.source.strip():
        raise Rejected("source is empty")
    if not IDENTIFIER.match(spec.class_name):
        raise Rejected(f"class name {spec.class_name!r} is not a Python identifier")
    if not spec.benchmark_seeds:
        raise Rejected("no benchmark seeds")
    if spec.hint is not None and spec.hint != "" and not spec.hint.strip():
        raise Rejected("hint is blank")
    phase = "loading"
    try:
        async with SandboxedEnv(spec.source, spec.class_name, spec.max_turns, limits) as env:
            resets = []
            for seed in spec.benchmark_seeds:
                phase = f"reset(seed={seed})"
                resets.append([await env.reset(seed) for _ in range(REPEATS)])
            if (difference := _first_difference(resets)) is not None:
                raise Rejected(f"reset is not deterministic: {difference}")
            if not env.has_reference:
                seed = spec.benchmark_seeds[0]
                phase = f"step() after reset(seed={seed})"
                await env.reset(seed)
                await env.step(format_action("noop"))
                phase = "the closing protocol check"
                await env.sync()  # a forged reply line anywhere above shows up here
                return "unproven"
            refs: dict[int, list[str]] = {}
            unsteady = False
            for seed in spec.benchmark_seeds:
                phase = f"reference_actions(seed={seed})"
                actions = refs[seed] = await env.reference_actions(seed)
                if not actions:
                    raise Rejected(f"reference_actions(seed={seed}) returned no actions")
                # A reference drawn from unseeded randomness would otherwise surface as a
                # reference that "does not win", hiding the real defect.
                for _ in range(REPEATS - 1):
                    unsteady |= await env.reference_actions(seed) != actions
            if unsteady:
                raise Rejected("reference_actions is not deterministic: calls with the same seed returned "
                               "different actions")
            if spec.hint:
                # Judge distinct solutions, not seeds: a structural hint ("a multiple of 10")
                # may coincide with the answer of some seeds (secret 10), and duplicates of
                # that one answer must not outvote the rest. The hint is the same for every
                # seed, so it leaks when it spells out most of the distinct solutions.
                distinct = {tuple(a) for a in refs.values()}
                leaked_solutions = {sol for sol in distinct if hint_leaks(spec.hint, list(sol))}
                leaked = [s for s in spec.benchmark_seeds if tuple(refs[s]) in leaked_solutions]
                if len(leaked_solutions) * 2 > len(distinct):
                    raise Rejected(
                        f"hint reveals the reference solution verbatim (seeds {', '.join(map(str, leaked))})"
                    )
            phase = "the closing protocol check"
            await env.sync()  # a forged reply line anywhere above shows up here
        outcomes = {}
        for seed in spec.benchmark_seeds:
            phase = f"replaying the reference on seed {seed}"
            outcomes[seed] = await _replay(spec, seed, refs[seed], limits)
        if any(len(set(plays)) > 1 for plays in outcomes.values()):
            raise Rejected("step is not deterministic: replaying the reference on the same seed gave different "
                           "observations, rewards or endings")
        lost = [seed for seed, plays in outcomes.items() if not plays[0][-1]]
        if lost:  # the first in the seeds' order: the same reason whatever order anything else ran in
            raise Rejected(f"reference solution does not win seed {lost[0]} within max_turns={spec.max_turns} "
                           f"({len(refs[lost[0]])} reference actions)")
        return "proven"
    except SandboxError as exc:
        raise Rejected(f"{exc.kind} during {phase}: {exc.message}") from None


async def _replay(spec: EnvironmentSpec, seed: int, actions: list[str],
                  limits: SandboxLimits | None) -> list[tuple]:
    """Play the reference on ``seed`` as an episode is played: in a fresh worker that never ran
    ``reference_actions()`` (measured, issue 20: a reference that set class-level state its own
    replay relied on was "proven" while every solver lost every seed in play). Played REPEATS times in that
    worker; each play is (its trajectory, whether it won), so unseeded randomness in step() shows as plays
    that differ rather than as a seed that sometimes does not win."""
    plays = []
    async with SandboxedEnv(spec.source, spec.class_name, spec.max_turns, limits) as env:
        for _ in range(REPEATS):
            trajectory: list = [_canonical(await env.reset(seed))]
            won = False
            for action in actions[: spec.max_turns]:
                step = await env.step(format_action(action))
                trajectory.append(_canonical(step))
                _, reward, terminated, truncated, _ = step
                if terminated or truncated:
                    won = is_success(terminated, reward)
                    break
            plays.append((tuple(trajectory), won))
        await env.sync()
    return plays


def _canonical(value: object) -> str:
    import json

    return json.dumps(value, sort_keys=True, default=repr)


def _first_difference(resets: list[list[tuple[str, dict]]]) -> str | None:
    """The reason resets of one seed differ, in a fixed order over all seeds; None when none differ.

    Neither the differing text nor where it starts is quoted: both come from the environment's randomness,
    and a reject reason is stored and shown to the author in the next round's brief, so a quoted draw made
    the same inputs give different briefs (and different hardened environments) from run to run."""
    if any(len({obs for obs, _ in same_seed}) > 1 for same_seed in resets):
        return "resets with the same seed gave different observations"
    if any(len({_canonical(info) for _, info in same_seed}) > 1 for same_seed in resets):
        return "resets with the same seed gave the same observation but different info dicts"
    return None
