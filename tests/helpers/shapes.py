"""Environment source templates of two shapes (``GRID``: walk to a goal, ``CODE``: guess a code), formatted with a
class name, max_turns and a size: two sources of one shape differ only in names and constants."""

from __future__ import annotations

GRID = '''
class {name}:
    def __init__(self, max_turns={turns}):
        self.max_turns = max_turns

    def reset(self, seed):
        self.pos = [0, 0]
        self.goal = [seed % {size}, {size} - 1]
        return "You are at 0,0", {{}}

    def step(self, action):
        dx, dy = {{"east": (1, 0), "north": (0, 1)}}.get(action, (0, 0))
        self.pos = [self.pos[0] + dx, self.pos[1] + dy]
        done = self.pos == self.goal
        return f"At {{self.pos}}", float(done), done, False, {{}}
'''


CODE = '''
import random

class {name}:
    def __init__(self, max_turns={turns}):
        self.max_turns = max_turns
        self.tries = 0

    def reset(self, seed):
        self.code = random.Random(seed).randint(0, {size})
        return "Guess the code", {{}}

    def step(self, action):
        self.tries += 1
        guess = int(action) if action.isdigit() else -1
        if guess == self.code:
            return "Open", 1.0, True, False, {{}}
        hint = "higher" if guess < self.code else "lower"
        return hint, 0.0, False, self.tries >= self.max_turns, {{}}
'''
