"""A real OpenAI-compatible endpoint whose games restate their history in every observation (issue 41).

Real observations often restate the game so far (a status line, "replies so far"), so a solver's prompt at
turn k holds k restatements and an episode's prompt grows faster than the simulated models' (short
observations, linear growth). This endpoint, on a thread, answers:

* an authoring call with one such game (``GAME``: guess a hidden number with "higher"/"lower" feedback,
  every observation listing every reply so far), its ``max_turns`` picked from the prompt's text (each slot's
  prompt differs), in the layout real authors reply in (prose, a ```python block, a ```json block);
* a play call as a player would: hinted, a binary search over the replies so far; cold, guesses drawn from
  the conversation (so episodes end at every length up to ``max_turns``).

Usage is counted as a tokenizer would, from the text (~4 characters a token, 4 a message), so prompt tokens
grow with the conversation; ``author_latency_s`` delays each authoring reply (a provider at realistic latency).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager

from envduels_dagster.core.protocol import SOLVER_SYSTEM_PROMPT
from tests.helpers.fixed_provider import provider_of

GAME = '''import random
import re


class RecountEnv:
    """Find a hidden number in 0..size-1 from "higher"/"lower" answers; every observation restates the game."""

    def __init__(self, max_turns: int = MAX_TURNS):
        self.max_turns = int(max_turns)
        self.size = 2 * self.max_turns
        self.secret = 0
        self.turn = 0
        self.replies = []
        self.done = True

    def _status(self, head):
        so_far = "; ".join(f"#{i + 1} you said {g}: {fb}" for i, (g, fb) in enumerate(self.replies)) or "none yet"
        return (f"{head}\\nRECOUNT status: turn {self.turn} of {self.max_turns}, the number is in 0..{self.size - 1}."
                f"\\nReplies so far: {so_far}.\\nReply with one whole number.")

    def reset(self, seed=None):
        self.secret = random.Random(seed).randrange(self.size)
        self.turn, self.replies, self.done = 0, [], False
        return self._status("A number is hidden. Guess it; after each guess you learn whether it is higher or lower."), {}

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        found = re.findall(r"-?\\d+", str(action))
        if not found:
            self.replies.append(("nothing", "not a number"))
            head = "That was not a number."
        else:
            guess = int(found[-1])
            if guess == self.secret:
                self.replies.append((guess, "correct"))
                self.done = True
                return self._status("Correct, you found it."), 1.0, True, False, {}
            feedback = "higher" if guess < self.secret else "lower"
            self.replies.append((guess, feedback))
            head = f"Not {guess}: the number is {feedback}."
        truncated = self.turn >= self.max_turns
        self.done = truncated
        return self._status(head), 0.0, False, truncated, {}

    def reference_actions(self, seed):
        return [str(random.Random(seed).randrange(2 * self.max_turns))]
'''

HINT = "Halve the interval each turn: answer its middle, then keep the half that the feedback points to."
LENGTHS = (6, 10, 16, 24)


def authoring_reply(prompt: str) -> str:
    """A reply in the layout real authors use: prose, the class, its metadata."""
    max_turns = LENGTHS[int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % len(LENGTHS)]
    meta = {"class_name": "RecountEnv", "domain": "number search", "hint": HINT, "max_turns": max_turns}
    return ("**Recount**: find a hidden number; every observation restates the game so far.\n\n```python\n"
            + GAME.replace("MAX_TURNS", str(max_turns)) + "```\n\n```json\n" + json.dumps(meta) + "\n```\n")


def play_reply(messages: list[dict]) -> str:
    """Hinted: the middle of what the replies so far leave open; cold: a guess drawn from the conversation."""
    last = messages[-1]["content"]
    size = int(re.search(r"the number is in 0\.\.(\d+)", last).group(1)) + 1
    if "Hint:" in messages[1]["content"]:
        lo, hi = 0, size - 1
        for guess, feedback in re.findall(r"you said (-?\d+): (higher|lower)", last):
            if feedback == "higher":
                lo = max(lo, int(guess) + 1)
            else:
                hi = min(hi, int(guess) - 1)
        return f"The middle of {lo}..{hi}. \\boxed{{{(lo + hi) // 2}}}"
    draw = int(hashlib.sha256("".join(m["content"] for m in messages).encode()).hexdigest(), 16)
    return f"A guess. \\boxed{{{draw % size}}}"


def most_at_once(bodies: list[dict]) -> int:
    """The most authoring calls the server was answering at the same moment."""
    spans = [b["served"] for b in bodies if "served" in b]
    return max((sum(s <= t < e for s, e in spans) for t, _ in spans), default=0)


def tokens(messages: list[dict]) -> int:
    return sum(len(m["content"]) for m in messages) // 4 + 4 * len(messages)


@contextmanager
def restating_provider(author_latency_s: float = 0.0) -> Iterator[tuple[str, list[dict]]]:
    """The endpoint on a thread (``fixed_provider.provider_of``); yields (api_base, the request bodies it received)."""

    def respond(body: dict) -> tuple[str, dict]:
        messages = body["messages"]
        if messages[0]["content"] == SOLVER_SYSTEM_PROMPT:  # a play call (else authoring or hardening)
            text = play_reply(messages)
        else:
            t0 = time.monotonic()
            time.sleep(author_latency_s)
            text = authoring_reply(messages[-1]["content"])
            body["served"] = (t0, time.monotonic())  # when the server was busy with it
        return text, {"prompt_tokens": tokens(messages), "completion_tokens": max(1, len(text) // 4)}

    with provider_of(respond) as served:
        yield served


def registry_text(base: str, authors: tuple[str, ...] = ("a1", "a2"), learner: str = "learner") -> str:
    """Authors and one learner on the endpoint, priced (so dollars are compared too)."""
    entry = ("  - name: {n}\n    model: openai/{n}\n    api_base: {b}\n    client: fast\n    roles: [{r}]\n"
             "    input_cost_per_mtok: {i}\n    output_cost_per_mtok: {o}\n")
    return "models:\n" + "".join(entry.format(n=n, b=base, r="author", i=3, o=15) for n in authors) + entry.format(
        n=learner, b=base, r="solver", i=0.2, o=0.8)
