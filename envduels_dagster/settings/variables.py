"""Every ``ENVDUELS_*`` variable, in one table: its name, default, meaning and check, checked once, up front.

Why one table: each variable used to be parsed where it was read, so a bad value surfaced late and
vaguely. ``ENVDUELS_TRAINING_ADMISSION=bogus`` failed after authoring, play and the marts (121 s, the
whole bill with real models); ``ENVDUELS_ENVS_PER_AUTHOR=0`` failed inside authoring with
``KeyError: 'domain'``; ``ENVDUELS_ROUNDS=abc`` said "invalid literal for int()" without naming the
variable, after the instance was written; ``ENVDUELS_ROUNDS=-1`` silently ran none and ``=100000`` hung
building the definitions (issue 33). ``check_settings()`` runs before anything is written or spent:
first in the CLI (exit 2, one line naming the variable and the accepted range) and when the definitions
are built (the code location then fails to load with that line). ``value(name)`` is how the readers
get a setting, so a reader and the check cannot disagree. The README's "Configuration" table is held to
this one by ``tests/settings/test_variables.py`` (a variable without a row, or a row without a variable, fails).

Kinds: ``int``/``float`` (a range), ``choice``, ``text`` (paths and URLs: the storage layer and the registry
loader report their own problems), and a ``parser`` of the engine's where the engine defines the format
(authoring slots, the spending cap): the engine never reads a variable itself, it is given the value.
``internal`` variables are set by the project for its own child processes (the dbt build, the sandbox's
self-check); they are listed so that every name the package uses is here, and are not user settings.
Nothing at import time.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from envduels_dagster.core.authoring.plan import (
    DEFAULT_DOMAIN_FAMILIES,
    DEFAULT_DUPLICATE_THRESHOLD,
    DEFAULT_WAVE_SIZE,
    AuthoringPlanError,
    parse_families,
    parse_threshold,
    parse_wave_size,
)
from envduels_dagster.core.requests.batching import DEFAULT_MAX_PAIRS_PER_RUN, DEFAULT_PARALLEL_RUNS


class SettingsError(ValueError):
    """An ENVDUELS_* variable that cannot be used (the CLI reports it as bad input, exit 2)."""


@dataclass(frozen=True)
class Setting:
    name: str
    meaning: str
    default: object
    kind: str = "int"  # int | float | choice | text (or a parser's format)
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    parser: Callable[[str], object] | None = None  # the engine's parser of this format; its error names the variable
    shown: str | None = None  # the default as the README shows it, when it is not the value (a path, "none")
    internal: bool = False  # set by the project for its own child processes, not a user setting
    up_front: bool = True  # checked by check_settings (False: by the commands that use it)

    @property
    def shown_default(self) -> str:
        return self.shown if self.shown is not None else str(self.default)

    def accepted(self) -> str:
        if self.kind == "text":
            return "any text"
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        what = "an integer" if self.kind == "int" else "a number"
        return f"{what} from {_num(self.low)} to {_num(self.high)}"

    def parse(self, text: str) -> object:
        raw = text.strip()
        if self.parser is not None:
            return self.parser(raw)
        if self.kind == "text":
            return raw
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


def _authoring(parse: Callable[[str], object], name: str) -> Callable[[str], object]:
    """An authoring slot setting, parsed by core/authoring/plan.py; its error names the variable."""
    def parsed(raw: str) -> object:
        try:
            return parse(raw)
        except AuthoringPlanError as exc:
            raise SettingsError(f"{name}={raw!r} cannot be used: {exc}") from None
    return parsed


def _budget(raw: str) -> float | None:
    """ENVDUELS_BUDGET_USD, parsed by core/models/budget.py (BudgetError: the CLI says "budget: ...")."""
    from envduels_dagster.core.models.budget import parse_budget  # the models package: only when a cap is read

    return parse_budget(raw)


POSTGRES_URL_FORM = "postgresql+psycopg2://user:password@host:port/db"


def postgres_url_of(raw: str) -> str:
    """ENVDUELS_POSTGRES_URL as libpq reads it (the call cache, DuckLake's catalog).

    Written ``postgresql+psycopg2://...`` it also serves the Dagster instance (deploy/dagster-postgres.yaml):
    dagster-postgres needs psycopg2, and SQLAlchemy 2.1 picks psycopg 3 for a bare ``postgresql://``."""
    url = raw
    for prefix in ("postgresql+psycopg2://", "postgres+psycopg2://"):
        if url.startswith(prefix):
            url = "postgresql://" + url[len(prefix):]
    if not url.startswith(("postgresql://", "postgres://")):
        raise SettingsError(f"ENVDUELS_STORAGE=shared needs ENVDUELS_POSTGRES_URL={POSTGRES_URL_FORM} "
                            f"(got {url.split('@')[-1][:40]!r})")
    return url


DAY = 86400
SETTINGS: tuple[Setting, ...] = (
    # where state lives (settings/locations.py)
    Setting("ENVDUELS_HOME", "all state: warehouse, call cache, Dagster instance, exports", "data", "text",
            shown="./data"),
    Setting("ENVDUELS_REGISTRY", "the model registry (unset: the one the experiment under ENVDUELS_HOME stored, else "
            "./models.yaml)", None, "text", shown="./models.yaml"),
    Setting("ENVDUELS_STORAGE", "where state lives, docs/DEPLOY.md", "embedded", "choice",
            choices=("embedded", "shared")),
    Setting("ENVDUELS_POSTGRES_URL", f"shared profile: {POSTGRES_URL_FORM}", None, "URL", parser=postgres_url_of,
            shown="", up_front=False),
    Setting("ENVDUELS_LAKE_DATA", "shared profile: the warehouse's Parquet files (a path every writer sees)", None,
            "text", shown="$ENVDUELS_HOME/lake/"),
    Setting("ENVDUELS_DBT_CACHE", "where an installed package without a dbt manifest parses one", None, "text",
            shown="~/.cache/envduels/"),
    # the experiment's sizes (stored with the experiment: settings/experiment.py)
    Setting("ENVDUELS_ENVS_PER_AUTHOR", "environments each model writes", 10, low=1, high=1000),
    Setting("ENVDUELS_SEEDS", "benchmark seeds per new environment, 0..N-1", 8, low=1, high=1000),
    Setting("ENVDUELS_ROUNDS", "co-evolution rounds after the first authoring", 1, low=0, high=20),
    Setting("ENVDUELS_TRAINING_ADMISSION", "how environments enter a training set", "probability", "choice",
            choices=("probability", "rule")),
    Setting("ENVDUELS_PANEL_MODE", "what a new model does to earlier rounds", "frozen", "choice",
            choices=("frozen", "live")),
    # authoring slots (core/authoring/plan.py parses them)
    Setting("ENVDUELS_AUTHOR_DOMAINS", "domain families, ';'-separated, one per authoring slot in turn",
            DEFAULT_DOMAIN_FAMILIES,
            "families", parser=_authoring(parse_families, "ENVDUELS_AUTHOR_DOMAINS"), shown="ten families"),
    Setting("ENVDUELS_AUTHOR_WAVE", "authoring slots per wave", DEFAULT_WAVE_SIZE, "wave size",
            parser=_authoring(parse_wave_size, "ENVDUELS_AUTHOR_WAVE")),
    Setting("ENVDUELS_AUTHOR_DUPLICATE_THRESHOLD", "AST similarity at which a reply copies an earlier environment",
            DEFAULT_DUPLICATE_THRESHOLD, "threshold", parser=_authoring(parse_threshold,
                                                                         "ENVDUELS_AUTHOR_DUPLICATE_THRESHOLD")),
    # spending (core/models/budget.py parses it; the commands that spend check it, exit 2)
    Setting("ENVDUELS_BUDGET_USD", "overall spending cap in US dollars over every priced model", None, "dollars",
            parser=_budget, shown="none", up_front=False),
    # the daemon and its runs
    Setting("ENVDUELS_STAGE_LAUNCH", "who launches a request's next stage: the run that ends the previous one "
            "(the sensor as fallback) or only the sensor's tick", "on-end", "choice", choices=("on-end", "sensor")),
    Setting("ENVDUELS_SENSOR_INTERVAL_S", "seconds between ticks of the request sensor", 5, low=1, high=DAY),
    Setting("ENVDUELS_AUTOMATION_INTERVAL_S", "seconds between ticks of the automation sensor", 30, low=1, high=DAY),
    Setting("ENVDUELS_STALE_INTERVAL_S", "seconds between looks for stale partitions", 3600, "float", low=0,
            high=365 * DAY),
    Setting("ENVDUELS_PAIRS_PER_RUN", "pairs in one batched run", DEFAULT_MAX_PAIRS_PER_RUN, low=1, high=10000),
    Setting("ENVDUELS_PARALLEL_RUNS", "runs a small pair stage is cut into", DEFAULT_PARALLEL_RUNS, low=1, high=64),
    Setting("ENVDUELS_LITELLM_PROCESSES", "litellm worker processes, 0 = in the calling process", 0, low=0, high=64),
    # set by the project for its own child processes
    Setting("ENVDUELS_WAREHOUSE", "the warehouse the dbt build attaches (the marts asset sets it)", None, "text",
            internal=True),
    Setting("ENVDUELS_DBT_TARGET", "the profiles.yml target of the dbt build (the marts asset sets it)", "warehouse",
            "text", internal=True),
    Setting("ENVDUELS_DBT_PARENT_PID", "the process a dbt build's child watches (assets/marts/dbt_cli.py)", None,
            "text", internal=True),
    Setting("ENVDUELS_SELF_CHECK_SECRET", "a canary the sandbox's self-check plants to prove it never leaks", None,
            "text", internal=True),
)
BY_NAME = {s.name: s for s in SETTINGS}


def value(name: str, environ: Mapping[str, str] | None = None) -> object:
    """The setting's value from the environment (its default when unset or empty); SettingsError when bad."""
    setting = BY_NAME[name]
    raw = (os.environ if environ is None else environ).get(name, "")
    return setting.parse(raw) if raw.strip() else setting.default


def is_set(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the variable is set to something (a blank value is unset: the default applies)."""
    assert name in BY_NAME, f"{name} is not in the settings table"
    return bool((os.environ if environ is None else environ).get(name, "").strip())


def text_value(name: str) -> str | None:
    """A ``text`` setting (a path, a URL): its value, None when unset and without a default."""
    got = value(name)
    return None if got is None else str(got)


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


def budget_cap() -> float | None:
    """ENVDUELS_BUDGET_USD: the overall spending cap in US dollars, None when unset; BudgetError (core/models/
    budget.py: the commands that spend say "budget: ...", exit 2) when it cannot be used."""
    got = value("ENVDUELS_BUDGET_USD")
    return None if got is None else float(got)  # type: ignore[arg-type]  # parse_budget's float


def check_settings(environ: Mapping[str, str] | None = None) -> dict[str, object]:
    """Every setting's value; raise SettingsError naming the first bad one (in table order) and its range."""
    env = os.environ if environ is None else environ
    values = {s.name: value(s.name, env) for s in SETTINGS if s.up_front and not s.internal}
    if values["ENVDUELS_STORAGE"] == "shared":  # the shared profile needs its server
        values["ENVDUELS_POSTGRES_URL"] = postgres_url_of(str(value("ENVDUELS_POSTGRES_URL", env) or ""))
    return values
