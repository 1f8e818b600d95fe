"""Play environments with a model, cold and hinted on the same seeds.

Why paired: lift is ``y_hint - y_cold`` on matched seeds, so both conditions of a
seed are always played. An environment or model failure makes the episode
``incomplete`` (excluded from statistics), never a solver ``failure``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from envduels_dagster.core.concurrency.gather import gather_or_cancel
from envduels_dagster.core.models.contract import SolveRequest
from envduels_dagster.core.models.types import ChatGateway, LLMError
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

# A factory of the context an episode plays inside (a provider slot shared by a run's pairs), or None.
Slot = Callable[[], AbstractAsyncContextManager]


def in_slot(slot: Slot | None) -> AbstractAsyncContextManager:
    """The context ``slot`` makes for one episode, or nothing to wait for."""
    return slot() if slot is not None else contextlib.nullcontext()


@dataclass(frozen=True)
class PlayConfig:
    """How a solver's episodes are played, wherever they are played (one episode, a pair with fixed seeds, a pair
    with adaptive seeds; ``pair.PairOptions`` adds the choice between those): the sandbox's ``limits``, the wall
    time an episode may spend waiting on the model (``budget_s``, None: no cap), the episodes played at once
    (``concurrency``), the ``slot`` each plays inside (a provider slot shared with other pairs, ``Slots.one``)
    and ``on_progress(done, total)`` after each (``total`` -1 when unknown in advance)."""

    limits: SandboxLimits | None = None
    budget_s: float | None = None
    concurrency: int = 8
    slot: Slot | None = None
    on_progress: Callable[[int, int], None] | None = None


DEFAULT_PLAY = PlayConfig()

FORMAT_ERROR_OBSERVATION = "Format error: no action found. Reply with your action inside \\boxed{}."


async def play_episode(gateway: ChatGateway, solver: str, env: EnvironmentSpec, seed: int, condition: Condition,
                       config: PlayConfig = DEFAULT_PLAY, sandbox: SandboxedEnv | None = None) -> EpisodeRecord:
    """Play one episode in a sandbox with ``config.limits``; ``config.budget_s`` caps the wall time spent waiting
    on the model for the episode (the config's concurrency, slot and progress are its callers').

    ``sandbox``: an already started worker holding this environment, reused across the
    environment's seeds (``reset`` builds a fresh instance each time); the caller closes
    it. By default each episode gets its own worker (the pipeline's only way: docs/DECISIONS.md,
    "Sandbox reuse removed").

    Raises only for fatal model errors (bad key, unknown provider) and registry errors,
    which no retry can fix; everything else ends in the record's status.
    """
    rec = EpisodeRecord(env_id=env.env_id, author=env.author, solver=solver, condition=condition, seed=seed,
                        status="incomplete", stop_reason="env_error")
    messages: list[dict[str, str]] = [{"role": "system", "content": SOLVER_SYSTEM_PROMPT}]
    rewards: list[float] = []  # per step, for the episode viewer (kept in the transcript's trailer, not sent)
    final_observation = ""  # what the environment said on the step that ended it (never sent to the model)
    limits, budget_s = config.limits, config.budget_s
    t0 = time.perf_counter()
    try:
        async with (contextlib.nullcontext(sandbox) if sandbox is not None
                    else SandboxedEnv(env.source, env.class_name, env.max_turns, limits)) as sandbox:
            observation, _ = await sandbox.reset(seed)
            hint = env.hint if condition == "hinted" else None
            messages.append({"role": "user", "content": first_user_message(observation, hint)})
            request = SolveRequest(env_id=env.env_id, condition=condition, observation=observation,
                                   hint=hint or None, max_turns=env.max_turns)
            while rec.turns < env.max_turns:
                remaining = None if budget_s is None else budget_s - (time.perf_counter() - t0)
                if remaining is not None and remaining <= 0:
                    raise LLMError("budget_exhausted", f"episode budget of {budget_s:g} s used up")
                try:
                    async with asyncio.timeout(remaining):  # no extra task per call, unlike wait_for
                        reply = await gateway.chat(solver, messages, seed=seed, request=request)
                except TimeoutError:
                    raise LLMError("budget_exhausted", f"episode budget of {budget_s:g} s used up") from None
                rec.model_calls += 1
                rec.retries += len(reply.retried_errors)
                rec.retry_errors += reply.retried_errors
                rec.cached_calls += int(reply.cached)
                rec.prompt_tokens += reply.prompt_tokens
                rec.completion_tokens += reply.completion_tokens
                rec.reasoning_tokens += reply.reasoning_tokens
                rec.cost_usd += reply.cost_usd
                rec.finish_reasons.append(reply.finish_reason)
                messages.append({"role": "assistant", "content": reply.text})
                rec.turns += 1
                if reply.finish_reason == "length":  # cut at max_tokens: the registry's setting, not the solver
                    rec.status, rec.stop_reason = "incomplete", "length"
                    rec.error = (f"the reply was cut at max_tokens ({reply.completion_tokens} completion tokens, "
                                 f"{reply.reasoning_tokens} of them reasoning): raise max_tokens for {solver} "
                                 "in the registry")
                    break
                action = parse_boxed(reply.text)
                if action is None:
                    rec.format_errors += 1
                    observation, reward, terminated, truncated = FORMAT_ERROR_OBSERVATION, 0.0, False, False
                else:
                    observation, reward, terminated, truncated, _ = await sandbox.step(format_action(action))
                rec.final_reward = reward
                rewards.append(float(reward))
                if terminated or truncated:
                    rec.status = "success" if is_success(terminated, reward) else "failure"
                    rec.stop_reason = "terminated" if terminated else "truncated"
                    final_observation = str(observation)
                    break
                messages.append({"role": "user", "content": observation})
            else:
                rec.status, rec.stop_reason = "failure", "max_turns"
            # No reply may be left unasked-for: environment code that forged a reply line
            # (it shares the worker's process) shows up here and voids the episode.
            await sandbox.sync()
    except SandboxError as exc:
        rec.status, rec.stop_reason, rec.error = "incomplete", "env_error", f"{exc.kind}: {exc.message}"
    except LLMError as exc:
        if exc.fatal:
            raise
        if exc.error_class == "stopped_at_budget":  # a cap refused the next call (core/models/budget.py): not a failure
            rec.status, rec.stop_reason, rec.error = "incomplete", "stopped_at_budget", str(exc)
        else:
            rec.status, rec.stop_reason, rec.error = "incomplete", "llm_error", str(exc)
            rec.retries += len(exc.retried_errors) + 1
            rec.retry_errors += [*exc.retried_errors, exc.error_class]
    rec.latency_s = time.perf_counter() - t0
    rec.transcript = [*messages, episode_trailer(rewards, final_observation)]
    return rec


TRAILER_ROLE = "environment"


def episode_trailer(rewards: list[float], final_observation: str) -> dict[str, str]:
    """The transcript's last entry, never sent to a model: the reward of each step and the observation of the
    step that ended the episode (empty when the turn limit or an error ended it). ``core.play.transcripts``
    shows them; the hardening digest leaves this role out."""
    return {"role": TRAILER_ROLE, "content": final_observation, "rewards": json.dumps(rewards)}


def episode_runner(gateway: ChatGateway, solver: str, config: PlayConfig,
                   total: int) -> Callable[[EnvironmentSpec, int, Condition], Awaitable[EpisodeRecord]]:
    """A function that plays one episode of ``solver``: at most ``config.concurrency`` at once, each inside its
    ``config.slot``, reporting ``config.on_progress(done, total)`` after each (``total`` -1 when unknown)."""
    sem = asyncio.Semaphore(max(1, config.concurrency))
    done = 0

    async def run(env: EnvironmentSpec, seed: int, condition: Condition) -> EpisodeRecord:
        nonlocal done
        async with sem, in_slot(config.slot):
            rec = await play_episode(gateway, solver, env, seed, condition, config)
        done += 1
        if config.on_progress is not None:
            config.on_progress(done, total)
        return rec

    return run


async def play_pair(gateway: ChatGateway, solver: str, envs: list[EnvironmentSpec],
                    config: PlayConfig = DEFAULT_PLAY) -> list[EpisodeRecord]:
    """Every valid environment x its benchmark seeds x {cold, hinted}, at most ``config.concurrency`` at once.

    ``config.slot``: a factory of the context each episode plays inside, besides the pair's own cap (a slot of
    the solver provider's pool shared with the other pairs of a run, ``play_pairs``): an episode holds
    it only while it plays, so a pair's slot is free for another pair's episode as soon as it ends.
    """
    conditions: tuple[Condition, ...] = ("cold", "hinted")
    jobs = [(env, seed, cond) for env in envs if env.valid for seed in env.benchmark_seeds for cond in conditions]
    run = episode_runner(gateway, solver, config, len(jobs))
    # A fatal model error ends the pair: stop the other episodes instead of letting them run on.
    return await gather_or_cancel(run(*job) for job in jobs)
