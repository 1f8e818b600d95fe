"""The environment protocol (EnvDuels export format v1 compatible) and its domain records.

Why here: every other module (sandbox, validation, runner, warehouse) speaks in
these types, so the protocol's rules live in exactly one place.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator

Condition = Literal["cold", "hinted"]
EpisodeStatus = Literal["success", "failure", "incomplete"]
# terminated/max_turns/truncated end a played episode; env_error, llm_error, length and stopped_at_budget
# make it incomplete (env_error: the environment broke; llm_error: the model call failed after retries;
# length: the provider cut a reply at the registry's max_tokens, a setting to raise, not a solver's mistake;
# stopped_at_budget: a spending cap refused the next call, core/models/budget.py).
StopReason = Literal["terminated", "truncated", "max_turns", "env_error", "llm_error", "length", "stopped_at_budget"]

DEFAULT_SEEDS: tuple[int, ...] = (0, 1, 2, 3)

# Seeds are unsigned 64-bit integers, 0..2**64-1: EnvDuels exports carry seeds such as 4191792089
# (unsigned 32-bit) and trainers draw 64-bit ones. The warehouse stores them as UBIGINT; JSON
# (exports, sandbox pipes, training rows) carries them as plain integers; Python passes them to
# ``reset(seed=...)`` unchanged. Negative seeds are refused at every entry (docs/INPUTS.md).
MIN_SEED, MAX_SEED = 0, 2**64 - 1
Seed = Annotated[int, Field(ge=MIN_SEED, le=MAX_SEED)]


def seed_problem(value: object) -> str | None:
    """Why ``value`` is not a seed (None when it is one); for loaders that name the bad entry."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{value!r} is not an integer"
    if not MIN_SEED <= value <= MAX_SEED:
        return f"{value} is outside 0..2**64-1 (seeds are unsigned 64-bit integers)"
    return None


# Benchmark seeds are a set: a seed listed twice stored two episodes per (environment, seed, condition),
# which the marts counted twice (an import with benchmark_seeds [0, 0, 0, 1] did, issue 33). And a bound:
# 100,000 seeds made validate and import run without end. 1000 is also ENVDUELS_SEEDS' limit.
MAX_BENCHMARK_SEEDS = 1000


def seeds_problem(seeds: list[int]) -> str | None:
    """Why ``seeds`` cannot be an environment's benchmark seeds (None when they can): too many, or repeated."""
    if len(seeds) > MAX_BENCHMARK_SEEDS:
        return f"{len(seeds)} benchmark seeds: at most {MAX_BENCHMARK_SEEDS} are allowed"
    first: dict[int, int] = {}
    for k, seed in enumerate(seeds):
        if seed in first:
            return (f"benchmark seed {seed} is listed twice (positions {first[seed]} and {k}): "
                    "seeds are a set, list each once")
        first[seed] = k
    return None


# Sizes at the entrances (a source file or export given to validate or import): a 60 MB source validated, a
# 4 GiB one was read whole, a 20 MB hint was imported (issue 33). An authored source is a few KB and a hint a
# few lines; the limits leave a wide margin and are checked on the file's size before it is read.
MAX_SOURCE_BYTES = 1024 * 1024
MAX_HINT_BYTES = 64 * 1024
MAX_JSON_FILE_BYTES = 1024 * 1024  # an export's metadata/privileged files (1000 seeds fit in 25 KB)


def size_problem(what: str, size: int, limit: int) -> str | None:
    """Why ``size`` bytes of ``what`` are too many (None when they are not)."""
    return f"{what} is {size:,} bytes: at most {limit:,} are allowed" if size > limit else None


SOLVER_SYSTEM_PROMPT = (
    "You are playing an interactive language game. Each turn you receive an observation "
    "and reply with exactly one action. Put your action inside \\boxed{...}; only the final "
    "\\boxed{} of your reply counts. Replies without a \\boxed{} action waste the turn."
)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse_boxed(text: str) -> str | None:
    """Return the content of the final balanced ``\\boxed{...}`` in ``text``, or None.

    Braces inside the box must balance (``\\boxed{f{x}}`` -> ``f{x}``); an unclosed
    final box falls back to the last closed one before it.
    """
    marker = "\\boxed{"
    found: str | None = None
    start = text.find(marker)
    while start != -1:
        i = start + len(marker)
        depth = 1
        j = i
        while j < len(text) and depth:
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
            j += 1
        if depth == 0:
            found = text[i : j - 1].strip()
        start = text.find(marker, start + len(marker))
    return found


def format_action(action: str) -> str:
    """The action string environments receive: always boxed, as the export format expects."""
    return f"\\boxed{{{action}}}"


def first_user_message(observation: str, hint: str | None) -> str:
    """First user turn by convention: ``Hint: ...`` (hinted only) then ``Observation: ...``."""
    if hint:
        return f"Hint: {hint}\n\nObservation: {observation}"
    return f"Observation: {observation}"


def is_success(terminated: bool, reward: float) -> bool:
    return bool(terminated) and reward > 0


class EnvironmentSpec(BaseModel):
    """One authored (or imported) environment, valid or rejected."""

    env_id: str
    author: str
    domain: str = "unknown"
    class_name: str
    max_turns: int = Field(ge=1, le=200)
    source: str
    source_sha256: str = ""
    hint: str = ""
    benchmark_seeds: list[Seed] = Field(default_factory=lambda: list(DEFAULT_SEEDS))
    valid: bool = False
    reject_reason: str | None = None
    winnability: Literal["proven", "unproven", "failed"] = "unproven"
    family: str | None = None  # author's own label, informational only
    round: int = 0
    parent_env_id: str | None = None
    author_meta: dict = Field(default_factory=dict)  # the metadata block exactly as the author wrote it
    # What writing it took (authoring or hardening call; validation makes no model calls). Cost at the
    # registry's or litellm's price, also for cache hits; None when the model has no known price.
    author_calls: int = 0
    author_prompt_tokens: int = 0
    author_completion_tokens: int = 0
    author_cost_usd: float | None = None
    # The authoring prompt the reply answered ("author-v2", core/authoring.PROMPT_VERSION; "harden-v1" for a
    # hardening round's rewrite); None for imports and for rows written before it was recorded.
    prompt_version: str | None = None

    @field_validator("benchmark_seeds")
    @classmethod
    def _seeds_are_a_bounded_set(cls, seeds: list[int]) -> list[int]:
        if (problem := seeds_problem(seeds)) is not None:
            raise ValueError(problem)
        return seeds

    def model_post_init(self, _ctx: Any) -> None:
        if not self.source_sha256:
            self.source_sha256 = sha256_text(self.source)


class Turn(BaseModel):
    action: str | None  # None: format error (no parsable \boxed{})
    reply: str
    observation: str
    reward: float
    terminated: bool
    truncated: bool


class EpisodeRecord(BaseModel):
    """One played episode. ``incomplete`` episodes never count as solver failures."""

    env_id: str
    author: str
    solver: str
    condition: Condition
    seed: Seed
    status: EpisodeStatus
    stop_reason: StopReason
    turns: int = 0
    format_errors: int = 0
    final_reward: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    model_calls: int = 0
    reasoning_tokens: int = 0  # the part of completion_tokens spent reasoning (reasoning models)
    finish_reasons: list[str | None] = Field(default_factory=list)  # the provider's, per model reply
    cached_calls: int = 0
    retries: int = 0  # failed attempts that the gateway retried (rate limits, 5xx, timeouts, ...)
    retry_errors: list[str] = Field(default_factory=list)
    error: str | None = None
    transcript: list[dict[str, str]] = Field(default_factory=list)
    # "fixed": its seed was committed before any outcome was seen (every fixed-design seed, and the adaptive
    # sampler's first min_seeds). "adaptive": played only because earlier outcomes left the verdict open, so
    # the marts leave it out (a stopping rule biases a mean of the seeds played; docs/STATISTICS.md).
    sampling: Literal["fixed", "adaptive"] = "fixed"
