"""Option types and the options several commands share: the experiment's sizes (``demo``, ``run``, ``plan``).

Why one helper: ``--envs-per-author``, ``--seeds`` and ``--rounds`` were declared three times, with three help
texts and their ranges written again each time. Their ranges are the ``ENVDUELS_*`` variables' (the settings
table, ``settings/variables.py``), so a flag and its variable accept the same values; all three commands resolve
them the same way (``settings/experiment.py``: the flag, else the variable, else the stored setting, else the
default).
"""

from __future__ import annotations

import argparse
import math

# option -> (its ENVDUELS_* variable, what it sets)
SIZE_OPTIONS = {
    "--envs-per-author": ("ENVDUELS_ENVS_PER_AUTHOR", "environments each author writes"),
    "--seeds": ("ENVDUELS_SEEDS", "benchmark seeds 0..N-1 per environment"),
    "--rounds": ("ENVDUELS_ROUNDS", "hardening rounds after the first authoring"),
}


def int_in(low: int, high: int | None, what: str, span: str | None = None):
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            shown = span or (f"{low}..{high}" if high is not None else f">= {low}")
            raise argparse.ArgumentTypeError(f"{what} {value} is outside {shown}")
        return value
    return parse


def float_in(low: float, high: float | None, what: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a number, got {text!r}") from None
        if high is None and not math.isfinite(value):  # serve-sim --latency-ms inf never answered (issue 44)
            raise argparse.ArgumentTypeError(f"{what} must be a finite number, got {text!r}")
        if not (value >= low and (high is None or value <= high)):
            span = f"{low}..{high}" if high is not None else f">= {low}"
            raise argparse.ArgumentTypeError(f"{what} {text} is outside {span}")
        return value
    return parse


def add_size_options(p: argparse.ArgumentParser) -> None:
    """``--envs-per-author``, ``--seeds``, ``--rounds``: ranges and defaults from the settings table."""
    from envduels_dagster.settings.variables import BY_NAME

    for option, (variable, meaning) in SIZE_OPTIONS.items():
        setting = BY_NAME[variable]
        low, high = int(setting.low or 0), int(setting.high or 0)
        p.add_argument(option, type=int_in(low, high, option), default=None,
                       help=f"{meaning}, {low}..{high} (default: {variable}, else the experiment's stored setting, "
                            f"else {setting.default})")
