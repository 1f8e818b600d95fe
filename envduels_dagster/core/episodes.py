"""Play environments with a model, cold and hinted on the same seeds.

Why paired: lift is ``y_hint - y_cold`` on matched seeds, so both conditions of a
seed are always played. An environment or model failure makes the episode
``incomplete`` (excluded from statistics), never a solver ``failure``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable

from envduels_dagster.core.gateway import LLMError
from envduels_dagster.core.protocol import (
    SOLVER_SYSTEM_PROMPT,
    Condition,
    EnvironmentSpec,
    EpisodeRecord,
    first_user_message,
    format_action,
    is_success,
    parse_boxed,
)
from envduels_dagster.core.sandbox import SandboxedEnv, SandboxError, SandboxLimits

FORMAT_ERROR_OBSERVATION = "Format error: no action found. Reply with your action inside \\boxed{}."


async def play_episode(gateway, solver: str, env: EnvironmentSpec, seed: int, condition: Condition,
                       limits: SandboxLimits | None = None) -> EpisodeRecord:
    rec = EpisodeRecord(env_id=env.env_id, author=env.author, solver=solver, condition=condition, seed=seed,
                        status="incomplete", stop_reason="env_error")
    messages: list[dict[str, str]] = [{"role": "system", "content": SOLVER_SYSTEM_PROMPT}]
    t0 = time.perf_counter()
    try:
        async with SandboxedEnv(env.source, env.class_name, env.max_turns, limits) as sandbox:
            observation, _ = await sandbox.reset(seed)
            hint = env.hint if condition == "hinted" else None
            messages.append({"role": "user", "content": first_user_message(observation, hint)})
            while rec.turns < env.max_turns:
                reply = await gateway.chat(solver, messages, seed=seed)
                rec.model_calls += 1
                rec.cached_calls += int(reply.cached)
                rec.prompt_tokens += reply.prompt_tokens
                rec.completion_tokens += reply.completion_tokens
                rec.cost_usd += reply.cost_usd
                messages.append({"role": "assistant", "content": reply.text})
                rec.turns += 1
                action = parse_boxed(reply.text)
                if action is None:
                    rec.format_errors += 1
                    observation, reward, terminated, truncated = FORMAT_ERROR_OBSERVATION, 0.0, False, False
                else:
                    observation, reward, terminated, truncated, _ = await sandbox.step(format_action(action))
                rec.final_reward = reward
                if terminated or truncated:
                    rec.status = "success" if is_success(terminated, reward) else "failure"
                    rec.stop_reason = "terminated" if terminated else "truncated"
                    break
                messages.append({"role": "user", "content": observation})
            else:
                rec.status, rec.stop_reason = "failure", "max_turns"
    except SandboxError as exc:
        rec.status, rec.stop_reason, rec.error = "incomplete", "env_error", f"{exc.kind}: {exc.message}"
    except LLMError as exc:
        rec.status, rec.stop_reason, rec.error = "incomplete", "llm_error", str(exc)
    rec.latency_s = time.perf_counter() - t0
    rec.transcript = messages
    return rec


async def play_pair(gateway, solver: str, envs: list[EnvironmentSpec], limits: SandboxLimits | None = None,
                    concurrency: int = 8,
                    on_progress: Callable[[int, int], None] | None = None) -> list[EpisodeRecord]:
    """Every valid environment x its benchmark seeds x {cold, hinted}, at most ``concurrency`` at once."""
    jobs = [(env, seed, cond) for env in envs if env.valid for seed in env.benchmark_seeds
            for cond in ("cold", "hinted")]
    sem = asyncio.Semaphore(concurrency)
    done = 0

    async def run(env, seed, cond):
        nonlocal done
        async with sem:
            rec = await play_episode(gateway, solver, env, seed, cond, limits)
        done += 1
        if on_progress is not None:
            on_progress(done, len(jobs))
        return rec

    return list(await asyncio.gather(*(run(*job) for job in jobs)))
