"""Play environments with a model, cold and hinted on the same seeds.

Why paired: lift is ``y_hint - y_cold`` on matched seeds, so both conditions of a
seed are always played. An environment or model failure makes the episode
``incomplete`` (excluded from statistics), never a solver ``failure``.
"""

from __future__ import annotations

import asyncio
import contextlib
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
                       limits: SandboxLimits | None = None, budget_s: float | None = None,
                       sandbox: SandboxedEnv | None = None) -> EpisodeRecord:
    """Play one episode. ``budget_s`` caps the wall time spent waiting on the model for the episode.

    ``sandbox``: an already started worker holding this environment, reused across the
    environment's seeds (``reset`` builds a fresh instance each time); the caller closes
    it. By default each episode gets its own worker.

    Raises only for fatal model errors (bad key, unknown provider) and registry errors,
    which no retry can fix; everything else ends in the record's status.
    """
    rec = EpisodeRecord(env_id=env.env_id, author=env.author, solver=solver, condition=condition, seed=seed,
                        status="incomplete", stop_reason="env_error")
    messages: list[dict[str, str]] = [{"role": "system", "content": SOLVER_SYSTEM_PROMPT}]
    t0 = time.perf_counter()
    try:
        async with (contextlib.nullcontext(sandbox) if sandbox is not None
                    else SandboxedEnv(env.source, env.class_name, env.max_turns, limits)) as sandbox:
            observation, _ = await sandbox.reset(seed)
            hint = env.hint if condition == "hinted" else None
            messages.append({"role": "user", "content": first_user_message(observation, hint)})
            while rec.turns < env.max_turns:
                remaining = None if budget_s is None else budget_s - (time.perf_counter() - t0)
                if remaining is not None and remaining <= 0:
                    raise LLMError("budget_exhausted", f"episode budget of {budget_s:g} s used up")
                try:
                    reply = await asyncio.wait_for(gateway.chat(solver, messages, seed=seed), remaining)
                except asyncio.TimeoutError:
                    raise LLMError("budget_exhausted", f"episode budget of {budget_s:g} s used up") from None
                rec.model_calls += 1
                rec.retries += len(reply.retried_errors)
                rec.retry_errors += reply.retried_errors
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
        if exc.fatal:
            raise
        rec.status, rec.stop_reason, rec.error = "incomplete", "llm_error", str(exc)
        rec.retries += len(exc.retried_errors) + 1
        rec.retry_errors += [*exc.retried_errors, exc.error_class]
    rec.latency_s = time.perf_counter() - t0
    rec.transcript = messages
    return rec


async def play_pair(gateway, solver: str, envs: list[EnvironmentSpec], limits: SandboxLimits | None = None,
                    concurrency: int = 8, on_progress: Callable[[int, int], None] | None = None,
                    budget_s: float | None = None) -> list[EpisodeRecord]:
    """Every valid environment x its benchmark seeds x {cold, hinted}, at most ``concurrency`` at once."""
    jobs = [(env, seed, cond) for env in envs if env.valid for seed in env.benchmark_seeds
            for cond in ("cold", "hinted")]
    sem = asyncio.Semaphore(concurrency)
    done = 0

    async def run(env, seed, cond):
        nonlocal done
        async with sem:
            rec = await play_episode(gateway, solver, env, seed, cond, limits, budget_s)
        done += 1
        if on_progress is not None:
            on_progress(done, len(jobs))
        return rec

    tasks = [asyncio.ensure_future(run(*job)) for job in jobs]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        # A fatal model error ends the pair: stop the other episodes instead of letting them run on.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
