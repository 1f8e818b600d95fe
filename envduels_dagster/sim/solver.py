"""Simulated solvers: read text observations, reply with ``\\boxed{}`` actions.

Each family gets a real strategy (bisection, consistent-code search, depth-first
maze exploration, rule induction); the profile limits it (precision, memory,
search budget, known rules, slips, hint use). Unknown games get a sensible,
well-formatted fallback move, never an exception.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from envduels_dagster.core.models.contract import SolveRequest
from envduels_dagster.core.protocol import parse_boxed
from envduels_dagster.sim.profiles import SimProfile

MOVES = {"north": (0, -1), "south": (0, 1), "east": (1, 0), "west": (-1, 0)}
REVERSE = {"north": "south", "south": "north", "east": "west", "west": "east"}


@dataclass
class GameView:
    """What the solver knows: the intro, the hint, and the remembered turns."""

    intro: str
    hint: str | None
    history: list[tuple[str | None, str]] = field(default_factory=list)  # (action, observation)
    current: str = ""


def read_conversation(messages: list[dict], memory: int, request: SolveRequest | None = None) -> GameView:
    """The game so far. The first observation and the hint come from the typed request; without one
    (a plain OpenAI client talking to serve-sim) the first user message is the intro and no hint is read."""
    users = [m["content"] for m in messages if m["role"] == "user"]
    actions = [parse_boxed(m["content"]) for m in messages if m["role"] == "assistant"]
    if request is not None:
        first, hint = request.observation, request.hint or None
    else:
        first, hint = (users[0] if users else ""), None
    observations = users[1:]
    history = list(zip(actions, observations))
    view = GameView(intro=first, hint=hint, history=history[-memory:] if memory else [])
    view.current = observations[-1] if observations else first
    return view


# How each game announces itself, and the phrases of hints that apply to it.
GAMES = {
    "guess": ("I am thinking of an integer", ("multiple of",)),
    "codelock": ("A lock has a code", ("never decrease",)),
    "maze": ("You are in a maze", ("cell (",)),
    "sequence": ("terms of a sequence", ("sum of the two terms", "even and odd positions", "quadratic",
                                          "multiplied", "differ by the same")),
}


def recognise(intro: str) -> str | None:
    return next((game for game, (marker, _) in GAMES.items() if marker in intro), None)


def internalized_hint(profile: SimProfile, game: str | None, rng: random.Random) -> str | None:
    """A hint learned in training that applies to this kind of game (the lift->learning study's learner)."""
    if game is None or not profile.learned_hints:
        return None
    applicable = [h for h in profile.learned_hints if any(p in h for p in GAMES[game][1])]
    return rng.choice(applicable) if applicable else None


def solve(profile: SimProfile, messages: list[dict], rng: random.Random, request: SolveRequest | None = None) -> str:
    view = read_conversation(messages, profile.memory, request)
    game = recognise(view.intro)
    offered = view.hint if view.hint is not None else internalized_hint(profile, game, rng)
    hint = offered if offered is not None and rng.random() < profile.hint_use else None
    if rng.random() < profile.slip:
        return "Let me think about this... I am not sure what to do yet."
    play = {"guess": _guess, "codelock": _codelock, "maze": _maze, "sequence": _sequence}.get(game)
    action = play(profile, view, hint, rng) if play else _fallback(view, rng)
    return f"My move: {action}.\n\\boxed{{{action}}}"


def _guess(p: SimProfile, view: GameView, hint: str | None, rng: random.Random) -> str:
    limit = int(re.search(r"between 1 and (\d+)", view.intro).group(1))
    step = 1
    if hint and (m := re.search(r"multiple of (\d+)", hint)):
        step = int(m.group(1))
    lo, hi, tried = 1, limit, set()
    for action, obs in view.history:
        if action is None or not (m := re.search(r"-?\d+", action)):
            continue
        g = int(m.group())
        tried.add(g)
        if "too low" in obs:
            lo = max(lo, g + 1)
        elif "too high" in obs:
            hi = min(hi, g - 1)
    candidates = [n for n in range(lo, hi + 1) if n % step == 0 and n not in tried]
    if not candidates:
        return str(rng.randint(1, limit))
    if rng.random() < p.precision:
        return str(candidates[(len(candidates) - 1) // 2])
    return str(rng.choice(candidates))


def _codelock(p: SimProfile, view: GameView, hint: str | None, rng: random.Random) -> str:
    m = re.search(r"code of (\d+) digits, each from 0 to (\d+)", view.intro)
    length, digits = int(m.group(1)), int(m.group(2)) + 1
    sorted_codes = bool(hint and "never decrease" in hint)
    clues = []
    for _action, obs in view.history:
        if (cm := re.search(r"Code (\d+): (\d+) digit", obs)):
            clues.append((cm.group(1), int(cm.group(2))))
    budget = p.search_budget if rng.random() < p.precision else max(1, p.search_budget // 10)
    tried = {c for c, _ in clues}
    for _ in range(budget):
        picked = [str(rng.randrange(digits)) for _ in range(length)]
        if sorted_codes:
            picked.sort()
        code = "".join(picked)
        if code in tried:
            continue
        if all(sum(a == b for a, b in zip(code, c)) == right for c, right in clues):
            return code
    return code


def _maze(p: SimProfile, view: GameView, hint: str | None, rng: random.Random) -> str:
    here = _position(view.current)
    doors = _doors(view.current)
    if here is None or not doors:
        return rng.choice(list(MOVES))
    visited = {(0, 0)}
    entered_by: dict[tuple[int, int], str] = {}
    prev = (0, 0)
    for action, obs in view.history:
        pos = _position(obs)
        if pos is None:
            continue
        visited.add(pos)
        if pos != prev and action in MOVES and pos not in entered_by:
            entered_by[pos] = action
        prev = pos
    goal = None
    if hint and (m := re.search(r"cell \((\d+), (\d+)\)", hint)):
        goal = (int(m.group(1)), int(m.group(2)))
    if rng.random() >= p.precision:
        return rng.choice(doors)
    fresh = [d for d in doors if _move(here, d) not in visited]
    if fresh:
        if goal is not None:
            fresh.sort(key=lambda d: abs(_move(here, d)[0] - goal[0]) + abs(_move(here, d)[1] - goal[1]))
            return fresh[0]
        return rng.choice(fresh)
    back = entered_by.get(here)
    if back is not None and REVERSE[back] in doors:
        return REVERSE[back]
    return rng.choice(doors)


def _position(text: str) -> tuple[int, int] | None:
    m = re.search(r"You are at \((\d+), (\d+)\)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _doors(text: str) -> list[str]:
    m = re.search(r"Open directions: ([a-z, ]+)\.", text)
    return [d.strip() for d in m.group(1).split(",") if d.strip() in MOVES] if m else []


def _move(pos: tuple[int, int], door: str) -> tuple[int, int]:
    dx, dy = MOVES[door]
    return pos[0] + dx, pos[1] + dy


RULE_KEYWORDS = {
    "fibonacci": "sum of the two terms",
    "alternating": "even and odd positions",
    "quadratic": "quadratic",
    "geometric": "multiplied",
    "arithmetic": "differ by the same",
}


def _predict(rule: str, t: list[int]) -> int | None:
    if len(t) < 3:
        return None
    d = [b - a for a, b in zip(t, t[1:])]
    if rule == "arithmetic" and len(set(d)) == 1:
        return t[-1] + d[0]
    if rule == "geometric" and t[0] != 0 and all(b == a * (t[1] // t[0]) for a, b in zip(t, t[1:])):
        return t[-1] * (t[1] // t[0])
    if rule == "quadratic":
        dd = [b - a for a, b in zip(d, d[1:])]
        if len(set(dd)) == 1:
            return t[-1] + d[-1] + dd[0]
    if rule == "fibonacci" and all(t[i] == t[i - 1] + t[i - 2] for i in range(2, len(t))):
        return t[-1] + t[-2]
    if rule == "alternating" and len(t) >= 4:
        ev, od = t[0::2], t[1::2]
        if len({b - a for a, b in zip(ev, ev[1:])}) == 1 and len({b - a for a, b in zip(od, od[1:])}) == 1:
            src = ev if len(t) % 2 == 0 else od
            return src[-1] + (src[-1] - src[-2]) if len(src) >= 2 else None
    return None


def _sequence(p: SimProfile, view: GameView, hint: str | None, rng: random.Random) -> str:
    m = re.search(r"sequence: ([-\d, ]+)\.", view.intro)
    terms = [int(x) for x in m.group(1).split(",")]
    wrong = {a for a, obs in view.history if a is not None and "wrong" in obs}
    rules = list(p.rules)
    if hint:
        for rule, words in RULE_KEYWORDS.items():
            if words in hint:
                rules.insert(0, rule)
                break
    guesses = [g for r in rules if (g := _predict(r, terms)) is not None]
    guesses += [2 * terms[-1] - terms[-2], terms[-1] + terms[-2], 2 * terms[-1]]
    if rng.random() >= p.precision:
        guesses.insert(0, terms[-1] + rng.randint(1, 9))
    for g in guesses:
        if str(g) not in wrong:
            return str(g)
    return str(terms[-1] + rng.randint(1, 99))


def _fallback(view: GameView, rng: random.Random) -> str:
    # A format-error notice says nothing about the game (and its "no action found" would
    # be read as the option "no"): answer the latest real observation instead.
    text = next((obs for obs in [view.current, *(o for _, o in reversed(view.history))]
                 if not obs.startswith("Format error")), view.intro)
    options = re.findall(r"\b(north|south|east|west|yes|no|left|right|up|down)\b", text, re.I)
    if options:
        return rng.choice(options).lower()
    if (either := re.search(r"\b([A-Za-z]+) or ([A-Za-z]+)\b", text)):
        return rng.choice(either.groups()).lower()
    numbers = re.findall(r"-?\d+", text)
    return rng.choice(numbers) if numbers else "1"
