"""Environment sources the tests author, validate and play: ``CODE`` (a coin toss with a reference solution) and
``UNKNOWN`` (a game no simulated model knows: they play it with boxed moves)."""

from __future__ import annotations

CODE = '''import random


class Coin:
    def __init__(self, max_turns=2):
        self.max_turns = max_turns

    def reset(self, seed):
        self.side = random.Random(seed).choice(["heads", "tails"])
        return "Call the coin: heads or tails.", {}

    def step(self, action):
        won = self.side in action
        return ("Right!" if won else "Wrong."), float(won), True, False, {}

    def reference_actions(self, seed):
        return [random.Random(seed).choice(["heads", "tails"])]
'''


UNKNOWN = '''
class Crossroads:
    """A game no simulated model knows: pick a side at each of three forks."""

    def __init__(self, max_turns=6):
        self.max_turns = max_turns

    def reset(self, seed):
        self.path = ["left" if (seed >> i) & 1 else "right" for i in range(3)]
        self.turn, self.fork = 0, 0
        return "You reach a fork in the road. Go left or right?", {}

    def step(self, action):
        self.turn += 1
        if action == "\\\\boxed{" + self.path[self.fork] + "}":
            self.fork += 1
            if self.fork == len(self.path):
                return "You are home!", 1.0, True, False, {}
            return "Another fork. Go left or right?", 0.0, False, False, {}
        return "A dead end; back to the fork. Go left or right?", 0.0, False, self.turn >= self.max_turns, {}
'''
