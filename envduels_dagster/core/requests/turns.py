"""Play tokens as measured, turn by turn: what a plan charges for an episode of T calls, without a growth shape.

Why measured per turn and not a formula: a solver's prompt at its k-th call is the whole conversation so far,
so how it grows depends on what the environment's observations say. Simulated observations are short and
grow by a few tokens a turn; real ones often restate the game's history (a status line, "replies so far"),
and then an episode's prompt grows faster than any fixed law. The earlier fit ``P = first x T + growth x
T(T-1)/2`` came out negative on such games and the plan fell back to the simulated defaults (-77% on a real
learner's tokens, issue 41). Here the prompt of each call is read back from the episodes the warehouse
already holds: an episode's transcript gives each call's prompt (every message before that reply), its
length in characters shares out the episode's measured prompt tokens between its calls, and the calls
at turn index k of every episode average to ``prompt(k)``. An episode of T calls then costs
``prompt(0) + ... + prompt(T-1)``; beyond the longest measured turn the table is extended at the slope of its
last measured turns (never below it), and only there.

Episode length varies (a won episode stops early, a failing one runs to ``max_turns``), and the prompt of a long
episode is more than proportional to its length, so a plan charges each environment the mean over the
solver's measured turn fills (calls / max_turns, kept as quantiles) rather than the prompt of the mean length.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

SAMPLE_EPISODES = 400  # transcripts read per solver (a deterministic sample): enough for a per-turn mean
TAIL_TURNS = 4  # the last measured turns whose slope extends the table
FILL_QUANTILES = 20  # a solver's turn fills kept as this many quantiles


@dataclass(frozen=True)
class TurnTable:
    """A solver's mean prompt tokens per call by turn index (0: the first call) and how many episodes each
    mean is over (those that reached that turn)."""

    prompts: tuple[float, ...]
    counts: tuple[int, ...]
    episodes: int

    def prompt_at(self, k: int) -> float:
        """Mean prompt tokens of call ``k``: measured where an episode reached it, else the measured tail's
        slope carried on (never below the last measured turn)."""
        if k < len(self.prompts):
            return self.prompts[k]
        return self.prompts[-1] + self.slope() * (k - len(self.prompts) + 1)

    def slope(self) -> float:
        """Tokens a turn adds over the last ``TAIL_TURNS`` measured turns (least squares, at least 0)."""
        tail = self.prompts[-TAIL_TURNS:]
        if len(tail) < 2:
            return 0.0
        xs = range(len(tail))
        mx, my = (len(tail) - 1) / 2, sum(tail) / len(tail)
        num = sum((x - mx) * (y - my) for x, y in zip(xs, tail))
        den = sum((x - mx) ** 2 for x in xs)
        return max(0.0, num / den)

    def episode_prompt(self, calls: float) -> float:
        """Prompt tokens of an episode of ``calls`` calls (a fractional last call counts in part)."""
        whole = int(math.floor(calls))
        total = sum(self.prompt_at(k) for k in range(whole))
        return total + (calls - whole) * self.prompt_at(whole)


def per_call_prompts(transcript: list[dict], calls: int, prompt_tokens: float) -> list[float] | None:
    """The prompt tokens of each of an episode's ``calls`` calls: its measured ``prompt_tokens`` shared out by
    each call's prompt length (system, first observation, then a reply and an observation per turn: call k
    is sent every message before reply k), counted as the gateway estimates (~4 characters a token, 4 a
    message). None when the transcript does not hold ``calls`` replies (an old or cut row)."""
    sizes, running, seen = [], 0.0, 0
    for message in transcript:
        if message.get("role") == "assistant":
            sizes.append(running)
            seen += 1
            if seen == calls:
                break
        running += len(str(message.get("content", ""))) / 4 + 4
    if seen != calls or calls == 0 or sum(sizes) <= 0:
        return None
    scale = prompt_tokens / sum(sizes)
    return [s * scale for s in sizes]


def turn_tables(conn, solvers: set[str], sample: int = SAMPLE_EPISODES) -> dict[str, TurnTable]:
    """Per solver in ``solvers``, the per-turn table over (a deterministic sample of ``sample`` of) its finished
    episodes in the warehouse ``conn``."""
    rows = conn.execute("""
        SELECT solver, transcript, model_calls, prompt_tokens FROM (
            SELECT solver, transcript, model_calls, prompt_tokens,
                   row_number() OVER (PARTITION BY solver ORDER BY hash(env_id, seed, condition, round)) AS i
            FROM episodes WHERE status <> 'incomplete' AND model_calls > 0 AND prompt_tokens > 0)
        WHERE i <= ? ORDER BY solver, i""", [sample]).fetchall()
    sums: dict[str, list[float]] = {}
    counts: dict[str, list[int]] = {}
    episodes: dict[str, int] = {}
    for solver, transcript, calls, prompt in rows:
        if solver not in solvers:
            continue
        try:
            per_call = per_call_prompts(json.loads(transcript or "[]"), int(calls), float(prompt))
        except (ValueError, TypeError, AttributeError):
            per_call = None
        if per_call is None:
            continue
        s, c = sums.setdefault(solver, []), counts.setdefault(solver, [])
        for k, tokens in enumerate(per_call):
            if k == len(s):
                s.append(0.0)
                c.append(0)
            s[k] += tokens
            c[k] += 1
        episodes[solver] = episodes.get(solver, 0) + 1
    return {m: TurnTable(tuple(x / n for x, n in zip(sums[m], counts[m])), tuple(counts[m]), episodes[m])
            for m in sums}


def quantiles(values: list[float], n: int = FILL_QUANTILES) -> tuple[float, ...]:
    """``n`` evenly spaced quantiles (midpoints) of ``values``: a distribution a plan can average over."""
    ordered = sorted(values)
    if not ordered:
        return ()
    if len(ordered) <= n:
        return tuple(ordered)
    return tuple(ordered[min(len(ordered) - 1, int((i + 0.5) * len(ordered) / n))] for i in range(n))


def planned_prompt(table: TurnTable, fills: tuple[float, ...], max_turns: float) -> float:
    """Mean prompt tokens of an episode of an environment of ``max_turns``: over the solver's measured fills."""
    return sum(table.episode_prompt(min(1.0, f) * max_turns) for f in fills) / len(fills)
