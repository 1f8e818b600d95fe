"""Every ``ENVDUELS_*`` setting that is a number or a choice: its accepted range, checked once, up front.

Why one table: each variable used to be parsed where it was read, so a bad value surfaced late and
vaguely. ``ENVDUELS_TRAINING_ADMISSION=bogus`` failed after authoring, play and the marts (121 s, the
whole bill with real models); ``ENVDUELS_ENVS_PER_AUTHOR=0`` failed inside authoring with
``KeyError: 'domain'``; ``ENVDUELS_ROUNDS=abc`` said "invalid literal for int()" without naming the
variable, after the instance was written; ``ENVDUELS_ROUNDS=-1`` silently ran none and ``=100000`` hung
building the definitions (issue 33). ``check_settings()`` runs before anything is written or spent:
first in the CLI (exit 2, one line naming the variable and the accepted range) and when the definitions
are built (the code location then fails to load with that line). ``value(name)`` is how the readers
get a setting, so a reader and the check cannot disagree.

Stdlib (and two constants of ``core/requests/batching.py``) only, nothing at import time. Paths (ENVDUELS_HOME, ENVDUELS_REGISTRY, ENVDUELS_LAKE_DATA) are
not ranges: the registry loader and the storage layer report their own problems.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from envduels_dagster.core.requests.batching import DEFAULT_MAX_PAIRS_PER_RUN, DEFAULT_PARALLEL_RUNS


class SettingsError(ValueError):
    """An ENVDUELS_* variable that cannot be used (the CLI reports it as bad input, exit 2)."""


@dataclass(frozen=True)
class Setting:
    name: str
    meaning: str
    default: object
    kind: str = "int"  # int | float | choice
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()

    def accepted(self) -> str:
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        what = "an integer" if self.kind == "int" else "a number"
        return f"{what} from {_num(self.low)} to {_num(self.high)}"

    def parse(self, text: str) -> object:
        raw = text.strip()
        if self.kind == "choice":
            if raw.lower() not in self.choices:
                raise self._error(text)
            return raw.lower()
        try:
            number: float = int(raw, 10) if self.kind == "int" else float(raw)
        except ValueError:
            raise self._error(text) from None
        if not math.isfinite(number) or (self.low is not None and number < self.low) or \
                (self.high is not None and number > self.high):
            raise self._error(text)
        return number

    def _error(self, text: str) -> SettingsError:
        return SettingsError(f"{self.name}={text!r} is not accepted: expected {self.accepted()} "
                             f"({self.meaning}; unset it for the default, {self.default})")


def _num(x: float | None) -> str:
    return "-inf" if x is None else str(int(x)) if float(x).is_integer() else str(x)


DAY = 86400
SETTINGS: tuple[Setting, ...] = (
    Setting("ENVDUELS_STORAGE", "where state lives, docs/DEPLOY.md", "embedded", "choice",
            choices=("embedded", "shared")),
    Setting("ENVDUELS_ENVS_PER_AUTHOR", "environments each model writes", 10, low=1, high=1000),
    Setting("ENVDUELS_SEEDS", "benchmark seeds per new environment, 0..N-1", 8, low=1, high=1000),
    Setting("ENVDUELS_ROUNDS", "co-evolution rounds after the first authoring", 1, low=0, high=20),
    Setting("ENVDUELS_TRAINING_ADMISSION", "how environments enter a training set", "probability", "choice",
            choices=("probability", "rule")),
    Setting("ENVDUELS_PANEL_MODE", "what a new model does to earlier rounds", "frozen", "choice",
            choices=("frozen", "live")),
    Setting("ENVDUELS_STAGE_LAUNCH", "who launches a request's next stage: the run that ends the previous one "
            "(the sensor as fallback) or only the sensor's tick", "on-end", "choice", choices=("on-end", "sensor")),
    Setting("ENVDUELS_SENSOR_INTERVAL_S", "seconds between ticks of the request sensor", 5, low=1, high=DAY),
    Setting("ENVDUELS_AUTOMATION_INTERVAL_S", "seconds between ticks of the automation sensor", 30, low=1, high=DAY),
    Setting("ENVDUELS_STALE_INTERVAL_S", "seconds between looks for stale partitions", 3600, "float", low=0,
            high=365 * DAY),
    Setting("ENVDUELS_PAIRS_PER_RUN", "pairs in one batched run", DEFAULT_MAX_PAIRS_PER_RUN, low=1, high=10000),
    Setting("ENVDUELS_PARALLEL_RUNS", "runs a small pair stage is cut into", DEFAULT_PARALLEL_RUNS, low=1, high=64),
    Setting("ENVDUELS_LITELLM_PROCESSES", "litellm worker processes, 0 = in the calling process", 0, low=0, high=64),
)
BY_NAME = {s.name: s for s in SETTINGS}


def value(name: str, environ: Mapping[str, str] | None = None) -> object:
    """The setting's value from the environment (its default when unset or empty); SettingsError when bad."""
    setting = BY_NAME[name]
    raw = (os.environ if environ is None else environ).get(name, "")
    return setting.parse(raw) if raw.strip() else setting.default


def int_value(name: str) -> int:
    return int(value(name))  # type: ignore[call-overload]  # an "int" or "float" setting


# Dagster's sensor daemon looks at every sensor once per loop of about 5 s and skips a sensor whose last tick
# started less than its minimum interval ago. A tick's timestamp is taken a fraction of a second into its loop,
# so the next loop comes a fraction of a second short of any multiple of 5 s: declared as is, an interval of
# 5 s ticked every 5 or 10 s (half each, measured) and 30 s every 30 or 35 s. Declaring one second less makes
# the loop that comes at the interval tick (issue 34).
DAEMON_LOOP_SLACK_S = 1


def sensor_interval(name: str) -> int:
    """The ``minimum_interval_seconds`` to declare for a sensor whose interval is the setting ``name``."""
    return max(1, int_value(name) - DAEMON_LOOP_SLACK_S)


def float_value(name: str) -> float:
    return float(value(name))  # type: ignore[arg-type]


def check_settings(environ: Mapping[str, str] | None = None) -> dict[str, object]:
    """Every setting's value; raise SettingsError naming the first bad one (in table order) and its range."""
    env = os.environ if environ is None else environ
    values = {s.name: value(s.name, env) for s in SETTINGS}
    if values["ENVDUELS_STORAGE"] == "shared":
        from envduels_dagster.settings import postgres_url

        try:
            postgres_url()
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
    return values
