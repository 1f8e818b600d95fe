"""Which sizes and registry an experiment runs with: flags, ENVDUELS_* variables and the stored settings.

The settings live with the experiment (``core/storage/experiment_file.py``: ``$ENVDUELS_HOME/experiment.json``).
Two kinds of reader, two precedences (docs/DECISIONS.md, "Experiment settings live with the experiment"):

* **A command you type** (``envduels run``, ``demo``, ``plan``): its flags, else the variables
  (``ENVDUELS_ENVS_PER_AUTHOR``, ``ENVDUELS_SEEDS``, ``ENVDUELS_ROUNDS``, ``ENVDUELS_REGISTRY``), else the stored
  settings, else the defaults (10, 8, 1, ./models.yaml). The first run stores what it used; a later run that
  asks for something else says what changes and what it costs, and asks (``--yes``; no terminal: refused)
  before it stores the change and re-runs anything.
* **What runs on its own** (the request sensor, the runs it launches, the code location the UI loads): the
  stored settings, else the variables, else the defaults. A size variable that differs from the stored
  setting is not applied; the sensor's tick says so. The registry variable keeps its meaning everywhere
  (adding a model to the file the experiment uses is how the daemon is asked for new work).

Nothing here writes except :func:`store`; reading creates no directory.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from envduels_dagster.core.storage.experiment_file import ExperimentSettings, path_in, read, write
from envduels_dagster.settings.locations import home_dir, registry_file
from envduels_dagster.settings.variables import is_set

SIZE_ENV = {"envs_per_author": "ENVDUELS_ENVS_PER_AUTHOR", "seeds": "ENVDUELS_SEEDS", "rounds": "ENVDUELS_ROUNDS"}
FLAG = {"envs_per_author": "--envs-per-author", "seeds": "--seeds", "rounds": "--rounds"}


def stored() -> ExperimentSettings | None:
    """The settings stored under ENVDUELS_HOME, None before the first run (ExperimentFileError: a bad file)."""
    return read(home_dir())


def _env_or_default(name: str) -> int:
    from envduels_dagster.settings.variables import int_value

    return int_value(SIZE_ENV[name])  # the variable when set (its range checked), else its default


def _registry(path: str | None = None) -> str:
    return str(registry_file(path).resolve())


def for_runs() -> dict[str, int]:
    """The sizes of runs nobody typed a command for (daemon, sensor, launched runs): stored first."""
    kept = stored()
    if kept is not None:
        return kept.sizes()
    return {name: _env_or_default(name) for name in SIZE_ENV}


def ignored_variables() -> list[str]:
    """Size variables set to something other than the stored setting: not applied by the daemon."""
    kept = stored()
    if kept is None:
        return []
    out = []
    for name, var in SIZE_ENV.items():
        if is_set(var) and _env_or_default(name) != kept.sizes()[name]:
            out.append(f"{var}={_env_or_default(name)} (stored: {kept.sizes()[name]})")
    return out


def requested(flags: dict[str, int | None] | None = None, registry: str | None = None
              ) -> tuple[ExperimentSettings, dict[str, str]]:
    """What a typed command asks for: flags, else variables, else stored, else defaults; and where each came from."""
    flags = flags or {}
    kept = stored()
    sizes: dict[str, int] = {}
    sources: dict[str, str] = {}
    for name, var in SIZE_ENV.items():
        flag = flags.get(name)
        if flag is not None:
            sizes[name], sources[name] = int(flag), FLAG[name]
        elif is_set(var):
            sizes[name], sources[name] = _env_or_default(name), var
        elif kept is not None:
            sizes[name], sources[name] = kept.sizes()[name], f"stored in {path_in(home_dir())}"
        else:
            sizes[name], sources[name] = _env_or_default(name), "default"
    if registry:
        sources["registry"] = "--registry"
    elif is_set("ENVDUELS_REGISTRY"):
        sources["registry"] = "ENVDUELS_REGISTRY"
    else:
        sources["registry"] = "stored" if kept is not None else "default"
    return ExperimentSettings(registry=_registry(registry), **sizes), sources


def changes(new: ExperimentSettings) -> list[str] | None:
    """What ``new`` changes in the stored settings (empty: nothing); None when nothing is stored yet."""
    kept = stored()
    return None if kept is None else kept.changes(new)


def store(settings: ExperimentSettings, written_by: str) -> Path:
    """Write the experiment's settings (the one writer): ENVDUELS_HOME is created (0700) when missing."""
    from envduels_dagster.settings.locations import envduels_home

    return write(envduels_home(), settings, written_by)


def with_envs(settings: ExperimentSettings, envs_per_author: int) -> ExperimentSettings:
    """The same experiment with more (or fewer) environments per author: a later wave (``run --until-decided``)."""
    return replace(settings, envs_per_author=envs_per_author)


def describe(settings: ExperimentSettings, sources: dict[str, str] | None = None) -> str:
    """One line: the sizes and the registry, with where each came from when ``sources`` is given."""
    def src(name: str) -> str:
        return f" ({sources[name]})" if sources and sources.get(name) not in (None, "default") else ""

    return (f"{settings.envs_per_author} environments per author{src('envs_per_author')}, {settings.seeds} seeds"
            f"{src('seeds')}, {settings.rounds} hardening round(s){src('rounds')}, registry {settings.registry}"
            f"{src('registry')}")
