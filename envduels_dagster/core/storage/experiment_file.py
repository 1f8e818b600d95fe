"""The experiment's settings, stored with it: ``$ENVDUELS_HOME/experiment.json``. Stdlib only, no Dagster.

Why a file beside the warehouse: sizes given on a command line used to live only in that process, so
``envduels demo --envs-per-author 4 --seeds 4`` then ``envduels ui`` had the request sensor find every author
stale (4 seeds is not the default 8) and re-run the whole experiment at 10 x 8 (issue 41). The first run
that sets the sizes (environments per author, benchmark seeds, hardening rounds) and the registry file writes
them here; the sensor, the runs it launches, the UI, ``plan`` and later runs read them
(``envduels_dagster/settings/experiment.py`` resolves them against flags and environment variables; docs/DECISIONS.md,
"Experiment settings live with the experiment").

The file is written whole through a temporary file and a rename, so a reader sees the old settings or the
new ones, never half of either. A file that cannot be read is an error naming the file and the field, never
a silent fallback to the defaults: the defaults are what destroyed the experiment before.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

FILE_NAME = "experiment.json"
FORMAT = 1
# (field, lowest, highest): the ranges of ENVDUELS_ENVS_PER_AUTHOR, ENVDUELS_SEEDS and ENVDUELS_ROUNDS
# (env_settings.py), so a stored value is never one the command line or the variables would refuse.
SIZES = (("envs_per_author", 1, 1000), ("seeds", 1, 1000), ("rounds", 0, 20))


class ExperimentFileError(ValueError):
    """The stored settings cannot be read or used (names the file and the field, and what to do)."""


@dataclass(frozen=True)
class ExperimentSettings:
    envs_per_author: int
    seeds: int  # benchmark seeds 0..seeds-1 of every environment written
    rounds: int  # hardening rounds after round 0
    registry: str  # the registry file, an absolute path

    def sizes(self) -> dict[str, int]:
        return {"envs_per_author": self.envs_per_author, "seeds": self.seeds, "rounds": self.rounds}

    def changes(self, new: ExperimentSettings) -> list[str]:
        """What ``new`` changes, one phrase each (``seeds 8 -> 4``); empty when nothing."""
        out = [f"{name.replace('_', ' ')} {old} -> {now}" for (name, old), now
               in zip(self.sizes().items(), new.sizes().values()) if old != now]
        if self.registry != new.registry:
            out.append(f"registry {self.registry} -> {new.registry}")
        return out


def path_in(home: Path) -> Path:
    return home / FILE_NAME


def read(home: Path) -> ExperimentSettings | None:
    """The stored settings, or None when no run has stored any; ExperimentFileError when the file is bad."""
    path = path_in(home)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ExperimentFileError(f"{path}: cannot read the experiment's stored settings: {exc.strerror or exc}; "
                                  "check its permissions") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _bad(path, f"not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise _bad(path, "expected a JSON object")
    sizes = {}
    for name, low, high in SIZES:
        value = data.get(name)
        if type(value) is not int or not low <= value <= high:
            raise _bad(path, f"field {name}: expected an integer from {low} to {high}, got {value!r}")
        sizes[name] = value
    registry = data.get("registry")
    if not isinstance(registry, str) or not registry:
        raise _bad(path, f"field registry: expected the registry file's path, got {registry!r}")
    return ExperimentSettings(registry=registry, **sizes)


def _bad(path: Path, what: str) -> ExperimentFileError:
    return ExperimentFileError(f"{path}: the experiment's stored settings are unusable: {what}; fix the file, or "
                               "delete it and give the sizes again (envduels run --envs-per-author K --seeds N "
                               "--rounds R)")


def write(home: Path, settings: ExperimentSettings, written_by: str) -> Path:
    """Store ``settings`` (whole, atomically); ``written_by``: the command that set them, kept for people."""
    path = path_in(home)
    record = {"format": FORMAT, **asdict(settings), "written_by": written_by,
              "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    tmp = path.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def stored_registry(home: Path) -> str | None:
    """The registry file the experiment under ``home`` (ENVDUELS_HOME, given by settings/locations.py) stored, if
    any."""
    stored = read(home)
    return stored.registry if stored is not None else None
