"""Environments written the way frontier models write Python all validate (issue 21).

Told "standard library only", models reach for ``from __future__ import annotations``,
dataclasses, typing, enum, abc, statistics, fractions, decimal... Only 17 preloaded
modules used to be importable after the privilege drop, and code executed without a
``sys.modules`` entry broke ``@dataclass`` and ``typing.get_type_hints``. Each game
below is a realistic, winnable environment; each must validate with its reference
proven, through the real validator in a real sandbox.
"""

from __future__ import annotations

import asyncio
import os

import pytest

from envduels_dagster.core.authoring.validation import validate_environment
from envduels_dagster.core.protocol import EnvironmentSpec
from envduels_dagster.core.sandbox import ALLOWED_MODULES_SENTENCE, SandboxLimits

LIMITS = SandboxLimits(step_timeout_s=5.0, load_timeout_s=20.0, cpu_seconds=10)

MEDIAN_GUESS = '''
from __future__ import annotations

import random
import re
import statistics
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Config:
    size: int = 5
    low: int = 1
    high: int = 50


@dataclass
class State:
    values: list[int] = field(default_factory=list)
    guesses: int = 0
    target: float | None = None


class MedianGuess:
    """Guess the median of a hidden sample; feedback says higher or lower."""

    ACTION = re.compile(r"\\\\boxed\\{\\s*(-?\\d+(?:\\.\\d+)?)\\s*\\}")

    def __init__(self, max_turns: int = 8) -> None:
        self.max_turns = max_turns
        self.config = Config()
        self.state = State()

    def reset(self, seed: int) -> tuple[str, dict]:
        rng = random.Random(seed)
        values = [rng.randint(self.config.low, self.config.high) for _ in range(self.config.size)]
        self.state = State(values=values, target=statistics.median(values))
        return (f"A hidden sample of {self.config.size} integers in [{self.config.low}, {self.config.high}]. "
                "Guess its median."), {"size": self.config.size}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        self.state.guesses += 1
        match = self.ACTION.search(action)
        truncated = self.state.guesses >= self.max_turns
        if match is None:
            return "Reply with a number in \\\\boxed{}.", 0.0, False, truncated, {}
        guess = float(match.group(1))
        if guess == self.state.target:
            return "Exactly the median.", 1.0, True, False, {"guesses": self.state.guesses}
        hint = "higher" if guess < self.state.target else "lower"
        return f"Go {hint}.", 0.0, False, truncated, {}

    def reference_actions(self, seed: int) -> list[str]:
        rng = random.Random(seed)
        values = [rng.randint(self.config.low, self.config.high) for _ in range(self.config.size)]
        return [f"{statistics.median(values):g}"]
'''

FRACTION_LADDER = '''
from __future__ import annotations

import enum
import random
from fractions import Fraction
from typing import Optional


class Phase(enum.Enum):
    ASK = "ask"
    DONE = "done"


class FractionLadder:
    """Add two fractions; answer in lowest terms."""

    def __init__(self, max_turns: int = 3):
        self.max_turns = max_turns
        self.answer: Optional[Fraction] = None
        self.phase = Phase.ASK
        self.turns = 0

    @staticmethod
    def _pair(seed: int) -> tuple[Fraction, Fraction]:
        rng = random.Random(seed)
        return Fraction(rng.randint(1, 9), rng.randint(2, 9)), Fraction(rng.randint(1, 9), rng.randint(2, 9))

    def reset(self, seed: int):
        a, b = self._pair(seed)
        self.answer, self.phase, self.turns = a + b, Phase.ASK, 0
        return f"What is {a} + {b}? Answer as p/q in lowest terms.", {"phase": self.phase.value}

    def step(self, action: str):
        self.turns += 1
        text = action.removeprefix("\\\\boxed{").removesuffix("}").strip()
        try:
            given = Fraction(text)
        except (ValueError, ZeroDivisionError):
            return "Not a fraction.", 0.0, False, self.turns >= self.max_turns, {}
        if given == self.answer and str(given) == text:
            self.phase = Phase.DONE
            return "Correct.", 1.0, True, False, {"phase": self.phase.value}
        return "No.", 0.0, False, self.turns >= self.max_turns, {}

    def reference_actions(self, seed: int):
        a, b = self._pair(seed)
        return [str(a + b)]
'''

ABSTRACT_SHOP = '''
from __future__ import annotations

import abc
import collections
import copy
import pickle
import typing
from dataclasses import asdict, dataclass
from typing import ClassVar, NamedTuple


class Item(NamedTuple):
    name: str
    price: int


@dataclass
class Order:
    items: list[Item]
    budget: int
    TAX: ClassVar[int] = 0


class Game(abc.ABC):
    @abc.abstractmethod
    def reset(self, seed: int): ...

    @abc.abstractmethod
    def step(self, action: str): ...


class Shop(Game):
    """Buy the most expensive item you can afford."""

    CATALOGUE = (Item("pen", 3), Item("book", 12), Item("lamp", 25), Item("chair", 40))

    def __init__(self, max_turns: int = 4):
        self.max_turns = max_turns
        self.turns = 0
        # A real module: get_type_hints resolves the postponed annotations, pickle finds the class.
        assert typing.get_type_hints(Order)["budget"] is int
        assert pickle.loads(pickle.dumps(Order([Item("x", 1)], 1))) == Order([Item("x", 1)], 1)

    def reset(self, seed: int):
        self.order = Order(items=list(self.CATALOGUE), budget=10 + (seed * 7) % 35)
        self.counts = collections.Counter(item.name[0] for item in self.CATALOGUE)
        self.turns = 0
        shown = ", ".join(f"{i.name} ({i.price})" for i in self.order.items)
        return f"Budget {self.order.budget}. Items: {shown}.", {"order": asdict(copy.deepcopy(self.order))}

    def best(self) -> str:
        return max((i for i in self.order.items if i.price <= self.order.budget), key=lambda i: i.price).name

    def step(self, action: str):
        self.turns += 1
        if action == "\\\\boxed{" + self.best() + "}":
            return "Good buy.", 1.0, True, False, {}
        return "Not the best buy.", 0.0, False, self.turns >= self.max_turns, {}

    def reference_actions(self, seed: int):
        self.reset(seed)
        return [self.best()]
'''

LEDGER = '''
import bisect
import heapq
import string
import textwrap
from decimal import ROUND_HALF_UP, Decimal, localcontext
from functools import lru_cache, reduce
from itertools import accumulate
from operator import add


class Ledger:
    """Total a small ledger to the cent (banker's rounding is wrong here)."""

    def __init__(self, max_turns=3):
        self.max_turns = max_turns

    @staticmethod
    @lru_cache(maxsize=None)
    def entries(seed):
        letters = string.ascii_uppercase
        return tuple((letters[(seed + i) % 26], Decimal(f"{(seed * 37 + i * 113) % 1000}.{(i * 7 + seed) % 100:02d}5"))
                     for i in range(4))

    def total(self, seed):
        with localcontext() as ctx:
            ctx.prec = 28
            exact = reduce(add, (amount for _, amount in self.entries(seed)))
            return exact.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)

    def reset(self, seed):
        self.seed, self.turns = seed, 0
        lines = "\\n".join(f"{name}: {amount}" for name, amount in self.entries(seed))
        biggest = heapq.nlargest(1, (a for _, a in self.entries(seed)))[0]
        running = list(accumulate(a for _, a in self.entries(seed)))
        rank = bisect.bisect(sorted(running), biggest)
        return textwrap.dedent(f"""\\
            Ledger:
            {lines}
            Give the total rounded half-up to cents.""").strip(), {"rank": rank}

    def step(self, action):
        self.turns += 1
        if action == "\\\\boxed{" + str(self.total(self.seed)) + "}":
            return "Balanced.", 1.0, True, False, {}
        return "Off.", 0.0, False, self.turns >= self.max_turns, {}

    def reference_actions(self, seed):
        return [str(self.total(seed))]
'''

TYPED_WORDS = '''
from __future__ import annotations

import dataclasses
import datetime
import difflib
import enum
import hashlib
import json
import math
from collections import deque
from typing import Literal, Protocol, TypedDict

WORDS = ("amber", "brine", "cobalt", "dune", "ember", "fjord", "glade", "heron")


class Feedback(TypedDict):
    close: bool
    ratio: float


class Scorer(Protocol):
    def __call__(self, guess: str, secret: str) -> Feedback: ...


class Level(enum.IntEnum):
    EASY = 1
    HARD = 2


@dataclasses.dataclass(slots=True)
class Round:
    secret: str
    level: Level
    history: deque[str] = dataclasses.field(default_factory=lambda: deque(maxlen=3))
    mode: Literal["play", "over"] = "play"


def similarity(guess: str, secret: str) -> Feedback:
    ratio = difflib.SequenceMatcher(None, guess, secret).ratio()
    return {"close": ratio > 0.5, "ratio": round(ratio, 3)}


class WordHunt:
    """Find the secret word; feedback is a similarity ratio."""

    def __init__(self, max_turns: int = 8, scorer: Scorer = similarity):
        self.max_turns = max_turns
        self.scorer = scorer
        self.epoch = datetime.date(2024, 1, 1)

    @staticmethod
    def secret(seed: int) -> str:
        digest = hashlib.sha256(str(seed).encode()).digest()
        return WORDS[digest[0] % len(WORDS)]

    def reset(self, seed: int):
        self.round = Round(self.secret(seed), Level.HARD if seed % 2 else Level.EASY)
        day = self.epoch + datetime.timedelta(days=seed)
        return json.dumps({"words": list(WORDS), "day": day.isoformat(), "level": self.round.level.name}), {}

    def step(self, action: str):
        guess = action[len("\\\\boxed{"):-1]
        self.round.history.append(guess)
        if guess == self.round.secret:
            self.round.mode = "over"
            return "Found it.", 1.0, True, False, {"tries": len(self.round.history)}
        fb = self.scorer(guess, self.round.secret)
        over = len(self.round.history) >= min(self.max_turns, math.inf)
        return f"Similarity {fb['ratio']}", 0.0, False, over, dict(fb)

    def reference_actions(self, seed: int):
        return [self.secret(seed)]
'''

GAMES = {"MedianGuess": MEDIAN_GUESS, "FractionLadder": FRACTION_LADDER, "Shop": ABSTRACT_SHOP,
         "Ledger": LEDGER, "WordHunt": TYPED_WORDS}


def spec(class_name: str, source: str) -> EnvironmentSpec:
    return EnvironmentSpec(env_id=class_name.lower(), author="frontier", class_name=class_name, max_turns=6,
                           source=source, benchmark_seeds=[0, 1, 2, 3])


@pytest.mark.parametrize("class_name", list(GAMES))
def test_an_environment_written_the_way_frontier_models_write_validates(class_name):
    result = asyncio.run(validate_environment(spec(class_name, GAMES[class_name]), LIMITS))
    assert (result.valid, result.reject_reason, result.winnability) == (True, None, "proven")


def test_every_pure_standard_library_module_imports_inside_the_sandbox():
    """Not only the games' modules: the whole pure standard library is offered."""
    import sys

    names = sorted(n for n in sys.stdlib_module_names
                   if not n.startswith("_") and n not in ("antigravity", "this", "idlelib", "turtledemo",
                                                          "tkinter", "turtle", "msilib", "winreg", "winsound",
                                                          "msvcrt", "_winapi", "nt", "ensurepip", "lib2to3",
                                                          "venv", "pydoc_data", "curses", "readline", "dbm"))
    body = (f"import importlib, warnings\nwarnings.simplefilter('ignore')\nbad = []\nfor name in {names!r}:\n"
            "    try:\n        importlib.import_module(name)\n    except ImportError as exc:\n"
            "        bad.append(f'{name}: {exc}')\nreturn repr(bad), {}")
    source = ("class E:\n    def __init__(self, max_turns=5):\n        pass\n    def reset(self, seed):\n"
              + "\n".join("        " + line for line in body.splitlines())
              + "\n    def step(self, action):\n        return 'x', 1.0, True, False, {}\n")
    from envduels_dagster.core.sandbox import SandboxedEnv

    async def go():
        async with SandboxedEnv(source, "E", 5, SandboxLimits(step_timeout_s=60.0, cpu_seconds=60,
                                                              memory_mb=1024)) as env:
            return await env.reset(0)

    obs, _ = asyncio.run(go())
    assert len(names) > 150
    assert obs == "[]", obs


def test_without_a_mount_namespace_only_the_preloaded_modules_are_offered():
    """The documented fallback (isolate_filesystem=False, root): no view of the library can be
    mounted, and the throwaway uid cannot read /root/..., so statistics is missing -- and says so."""
    from envduels_dagster.core.sandbox.worker import _readable_by_anyone, _stdlib_dir

    if os.getuid() != 0 or _readable_by_anyone(_stdlib_dir()):
        pytest.skip("only where the interpreter's library is private and a throwaway uid is used")
    result = asyncio.run(validate_environment(spec("MedianGuess", MEDIAN_GUESS),
                                              SandboxLimits(isolate_filesystem=False)))
    assert result.valid is False
    assert result.reject_reason == ("load_error during loading: source failed to load: "
                                    "ModuleNotFoundError: No module named 'statistics'")


def test_the_authoring_sentence_names_what_the_sandbox_offers():
    for name in ("statistics", "fractions", "dataclasses", "typing", "enum", "abc", "__future__", "numpy"):
        assert name in ALLOWED_MODULES_SENTENCE
