"""Environment families the simulated authors write, as Python source templates.

Each template is complete, protocol-following source (constructor with
``max_turns``, ``reset(seed)``, ``step(action)``, ``reference_actions(seed)``);
``__NAME__`` tokens are filled with the author's difficulty parameters. Each
family has a *structure* that the privileged hint reveals, so the hint helps a
solver that uses it without giving the answer away.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GUESS = r'''
import random
import re


class __CLASS__:
    """Guess a secret integer; the secret is always a multiple of a hidden step."""

    LIMIT = __LIMIT__
    STEP = __STEP__

    def __init__(self, max_turns=__TURNS__):
        self.max_turns = max_turns

    def _secret(self, seed):
        rng = __RNG__
        return self.STEP * rng.randint(1, self.LIMIT // self.STEP)

    def reset(self, seed):
        self.secret = self._secret(seed)
        self.turn = 0
        return (
            f"I am thinking of an integer between 1 and {self.LIMIT}. Guess it. "
            f"You have {self.max_turns} guesses; after each wrong guess I say 'higher' or 'lower'."
        ), {}

    def step(self, action):
        self.turn += 1
        match = re.search(r"-?\d+", action)
        reward, terminated = 0.0, False
        if match is None:
            obs = "That is not a number. Guess an integer."
        else:
            guess = int(match.group())
            if guess == self.secret:
                obs, reward, terminated = "Correct!", 1.0, True
            elif guess < self.secret:
                obs = f"{guess} is too low: higher."
            else:
                obs = f"{guess} is too high: lower."
        truncated = not terminated and self.turn >= self.max_turns
        return obs, reward, terminated, truncated, {"turn": self.turn}

    def reference_actions(self, seed):
        return [str(self._secret(seed)__OFFSET__)]
'''

CODELOCK = r'''
import itertools
import random


class __CLASS__:
    """Open a digit lock; after each try you learn how many digits are in the right place."""

    LENGTH = __LENGTH__
    DIGITS = __DIGITS__

    def __init__(self, max_turns=__TURNS__):
        self.max_turns = max_turns

    def _code(self, seed):
        rng = __RNG__
        return "".join(sorted(str(rng.randrange(self.DIGITS)) for _ in range(self.LENGTH)))

    def reset(self, seed):
        self.code = self._code(seed)
        self.turn = 0
        return (
            f"A lock has a code of {self.LENGTH} digits, each from 0 to {self.DIGITS - 1}. "
            f"Enter a code; I tell you how many digits are in the right position. You have {self.max_turns} tries."
        ), {}

    def step(self, action):
        self.turn += 1
        guess = "".join(ch for ch in action if ch.isdigit())
        reward, terminated = 0.0, False
        if len(guess) != self.LENGTH:
            obs = f"A code has exactly {self.LENGTH} digits."
        elif guess == self.code:
            obs, reward, terminated = "The lock opens!", 1.0, True
        else:
            right = sum(a == b for a, b in zip(guess, self.code))
            obs = f"Code {guess}: {right} digit(s) in the right position."
        truncated = not terminated and self.turn >= self.max_turns
        return obs, reward, terminated, truncated, {"turn": self.turn}

    def reference_actions(self, seed):
        code = self._code(seed)__OFFSET__
        return [code]
'''

MAZE = r'''
import random
import re
from collections import deque


class __CLASS__:
    """Find the exit of a maze by moving north/south/east/west; the exit is not shown."""

    WIDTH = __WIDTH__
    HEIGHT = __HEIGHT__
    MOVES = {"north": (0, -1), "south": (0, 1), "east": (1, 0), "west": (-1, 0)}

    def __init__(self, max_turns=__TURNS__):
        self.max_turns = max_turns

    def _maze(self, seed):
        rng = __RNG__
        open_ = {(x, y): set() for x in range(self.WIDTH) for y in range(self.HEIGHT)}
        stack, seen = [(0, 0)], {(0, 0)}
        while stack:
            x, y = stack[-1]
            options = [(name, (x + dx, y + dy)) for name, (dx, dy) in self.MOVES.items()
                       if (x + dx, y + dy) in open_ and (x + dx, y + dy) not in seen]
            if not options:
                stack.pop()
                continue
            name, cell = rng.choice(options)
            back = {"north": "south", "south": "north", "east": "west", "west": "east"}[name]
            open_[(x, y)].add(name)
            open_[cell].add(back)
            seen.add(cell)
            stack.append(cell)
        return open_

    def _describe(self):
        doors = ", ".join(sorted(self.open[self.pos]))
        return f"You are at ({self.pos[0]}, {self.pos[1]}). Open directions: {doors}."

    def reset(self, seed):
        self.open = self._maze(seed)
        self.exit = (self.WIDTH - 1, self.HEIGHT - 1)
        self.pos = (0, 0)
        self.turn = 0
        intro = (f"You are in a maze of {self.WIDTH} x {self.HEIGHT} cells, starting at (0, 0). "
                 f"Find the exit within {self.max_turns} moves. Move with north, south, east or west. ")
        return intro + self._describe(), {}

    def step(self, action):
        self.turn += 1
        found = re.findall(r"north|south|east|west", action.lower())
        word = found[-1] if found else action
        reward, terminated = 0.0, False
        if word not in self.MOVES:
            obs = "Unknown move. Use north, south, east or west. " + self._describe()
        elif word not in self.open[self.pos]:
            obs = "A wall blocks the way. " + self._describe()
        else:
            dx, dy = self.MOVES[word]
            self.pos = (self.pos[0] + dx, self.pos[1] + dy)
            if self.pos == self.exit:
                obs, reward, terminated = "You found the exit!", 1.0, True
            else:
                obs = self._describe()
        truncated = not terminated and self.turn >= self.max_turns
        return obs, reward, terminated, truncated, {"turn": self.turn}

    def reference_actions(self, seed):
        open_ = self._maze(seed)
        goal = (self.WIDTH - 1, self.HEIGHT - 1)
        prev = {(0, 0): None}
        queue = deque([(0, 0)])
        while queue:
            cell = queue.popleft()
            for name in sorted(open_[cell]):
                dx, dy = self.MOVES[name]
                nxt = (cell[0] + dx, cell[1] + dy)
                if nxt not in prev:
                    prev[nxt] = (cell, name)
                    queue.append(nxt)
        path, cell = [], goal
        while prev[cell] is not None:
            cell, name = prev[cell]
            path.append(name)
        return path[::-1]__OFFSET__
'''

SEQUENCE = r'''
import random
import re


class __CLASS__:
    """Predict the next term of an integer sequence built by a hidden rule."""

    RULE = "__RULE__"
    SHOWN = __SHOWN__

    def __init__(self, max_turns=__TURNS__):
        self.max_turns = max_turns

    def _terms(self, seed):
        rng = __RNG__
        a, b, c = rng.randint(1, 9), rng.randint(2, 6), rng.randint(1, 5)
        n = self.SHOWN + 1
        if self.RULE == "arithmetic":
            return [a + b * i for i in range(n)]
        if self.RULE == "geometric":
            return [a * b ** i for i in range(n)]
        if self.RULE == "quadratic":
            return [a + b * i + c * i * i for i in range(n)]
        if self.RULE == "fibonacci":
            terms = [a, b]
            while len(terms) < n:
                terms.append(terms[-1] + terms[-2])
            return terms
        terms = []  # alternating: two interleaved arithmetic sequences
        for i in range(n):
            terms.append(a + b * (i // 2) if i % 2 == 0 else 10 * c + (b + c) * (i // 2))
        return terms

    def reset(self, seed):
        self.terms = self._terms(seed)
        self.turn = 0
        shown = ", ".join(str(t) for t in self.terms[:-1])
        return (f"Here are the first {self.SHOWN} terms of a sequence: {shown}. "
                f"What is the next term? You have {self.max_turns} attempts."), {}

    def step(self, action):
        self.turn += 1
        match = re.search(r"-?\d+", action)
        reward, terminated = 0.0, False
        if match is None:
            obs = "Answer with an integer."
        elif int(match.group()) == self.terms[-1]:
            obs, reward, terminated = "Correct!", 1.0, True
        else:
            obs = f"{match.group()} is wrong. Try again."
        truncated = not terminated and self.turn >= self.max_turns
        return obs, reward, terminated, truncated, {"turn": self.turn}

    def reference_actions(self, seed):
        return [str(self._terms(seed)[-1]__OFFSET__)]
'''

SEQUENCE_RULES = ("arithmetic", "geometric", "quadratic", "fibonacci", "alternating")

RULE_HINTS = {
    "arithmetic": "Consecutive terms always differ by the same amount.",
    "geometric": "Each term is the previous term multiplied by the same factor.",
    "quadratic": "The differences between consecutive terms grow by a constant amount (a quadratic rule).",
    "fibonacci": "Each term is the sum of the two terms before it.",
    "alternating": "The terms at even and odd positions form two separate arithmetic sequences.",
}


@dataclass(frozen=True)
class Family:
    name: str
    domain: str
    template: str


FAMILIES: dict[str, Family] = {
    "guess": Family("guess", "search", GUESS),
    "codelock": Family("codelock", "deduction", CODELOCK),
    "maze": Family("maze", "navigation", MAZE),
    "sequence": Family("sequence", "induction", SEQUENCE),
}


def render(template: str, **tokens: object) -> str:
    """Fill ``__TOKEN__`` placeholders; every placeholder must be given."""
    out = template
    for key, value in tokens.items():
        out = out.replace(f"__{key.upper()}__", str(value))
    leftover = sorted(set(re.findall(r"__[A-Z]+__", out)))
    if leftover:
        raise ValueError(f"unfilled template tokens: {leftover}")
    return out.lstrip("\n")
