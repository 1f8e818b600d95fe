"""``envduels validate`` and ``envduels play``: the commands that work on one environment file or export.

Why apart from ``cli.py``: that module is the parser and the one error boundary; the commands grew past
what one file under the 400-line limit holds. Heavy imports happen inside each command.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import math
from pathlib import Path
from typing import Literal

from envduels_dagster.cli.errors import UsageError


def find_class(source: str, path: Path) -> str:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)
               and {"reset", "step"} <= {f.name for f in n.body if isinstance(f, ast.FunctionDef)}]
    if len(classes) != 1:
        raise UsageError(f"{path}: found {len(classes)} environment classes; name one with --class")
    return classes[0]


def load_specs(args: argparse.Namespace):
    from envduels_dagster.core.protocol import (
        DEFAULT_SEEDS,
        MAX_HINT_BYTES,
        MAX_SOURCE_BYTES,
        EnvironmentSpec,
        seeds_problem,
        size_problem,
    )
    from envduels_dagster.core.training.format import load_export

    if args.seed and (problem := seeds_problem(args.seed)) is not None:
        raise UsageError(f"--seed: {problem}")
    if args.hint and (problem := size_problem("--hint", len(args.hint.encode()), MAX_HINT_BYTES)) is not None:
        raise UsageError(problem)
    path = Path(args.path)
    if path.is_dir():
        return load_export(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such file or directory; give an environment .py file or an export directory")
    if (problem := size_problem(f"{path}", path.stat().st_size, MAX_SOURCE_BYTES)) is not None:
        raise UsageError(f"{problem} for an environment source")  # checked before reading it
    try:
        source = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save the source as UTF-8") from None
    class_name = args.class_name or find_class(source, path) or "Environment"
    return [EnvironmentSpec(env_id=path.stem, author="local", class_name=class_name, max_turns=args.max_turns,
                            source=source, hint=args.hint or "", benchmark_seeds=args.seed or list(DEFAULT_SEEDS))]


def cmd_validate(args: argparse.Namespace) -> int:
    from envduels_dagster.core.authoring.validation import validate_environment
    from envduels_dagster.core.training.format import ExportFormatError

    try:
        specs = load_specs(args)
    except ExportFormatError as exc:
        # A malformed or tampered export is rejected input (exit 1, with the reason), not a usage error.
        if args.json:
            print(json.dumps({"env_id": None, "valid": False, "reason": str(exc), "winnability": "unproven"}))
        else:
            print(f"{args.path}: REJECTED: {exc}")
        return 1
    if not specs:  # an export that lists nothing validated "successfully" with no output (issue 33)
        print(json.dumps({"env_id": None, "valid": False, "reason": "the export lists no environments",
                          "winnability": "unproven"}) if args.json else f"{args.path}: REJECTED: the export lists "
              "no environments")
        return 1
    results = [asyncio.run(validate_environment(s)) for s in specs]
    for r in results:
        out = {"env_id": r.env_id, "valid": r.valid, "reason": r.reject_reason, "winnability": r.winnability}
        if args.json:
            print(json_line(out))
        else:
            print(f"{r.env_id}: " + ("valid" if r.valid else f"REJECTED: {r.reject_reason}")
                  + (f" (winnability {r.winnability})" if r.valid else ""))
    return 0 if all(r.valid for r in results) else 1


def cmd_play(args: argparse.Namespace) -> int:
    from envduels_dagster.core.models import Gateway
    from envduels_dagster.core.models.registry import load_registry
    from envduels_dagster.core.play.episode import play_episode
    from envduels_dagster.settings.locations import registry_file
    from envduels_dagster.settings.variables import int_value

    registry = load_registry(registry_file())
    registry.get(args.model)
    spec = load_specs(argparse.Namespace(**{**vars(args), "seed": [args.seed_one]}))[0]
    condition: Literal["cold", "hinted"] = "hinted" if spec.hint else "cold"
    gateway = Gateway(registry, default_cache(), limiter=default_limiter(), ledger=default_ledger(registry),
                      litellm_processes=int_value("ENVDUELS_LITELLM_PROCESSES"))
    rec = asyncio.run(play_episode(gateway, args.model, spec, args.seed_one, condition))
    if args.json:
        print(json_line(rec.model_dump(exclude={"transcript"} if not args.transcript else set())))
    else:
        if args.transcript:
            from envduels_dagster.core.play.transcripts import turns

            for k, turn in enumerate(turns(rec.transcript), 1):
                print(f"-- turn {k}\nobs: {turn.observation}" + (f"\nact: {turn.action}" if turn.action else "")
                      + (f"\nrew: {turn.reward:g}" if turn.reward is not None else ""))
        print(f"{rec.status} after {rec.turns} turn(s) ({rec.stop_reason}); format errors {rec.format_errors}"
              + (f"; error: {rec.error}" if rec.error else ""))
    return 0 if rec.status != "incomplete" else 1


def finite(value):
    """``value`` with every non-finite float (inf, nan) replaced by None: what JSON can carry."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def json_line(value) -> str:
    """One JSON object that every JSON reader accepts: never ``Infinity`` or ``NaN`` (issue 44: a price of 1e308
    made ``play --json`` print ``"cost_usd": Infinity``)."""
    return json.dumps(finite(value), allow_nan=False)


def default_limiter():
    from envduels_dagster.core.models import open_limiter
    from envduels_dagster.settings.locations import cache_location

    return open_limiter(cache_location())


def default_ledger(registry):
    """The budget ledger beside the call cache (None with no cap): ``play`` spends under the same caps as a run
    (issue 44: it made 10 priced calls past ENVDUELS_BUDGET_USD and recorded none)."""
    from envduels_dagster.core.models.budget import open_ledger
    from envduels_dagster.settings.locations import cache_location, envduels_home
    from envduels_dagster.settings.variables import budget_cap

    return open_ledger(registry, budget_cap(), cache_location(), envduels_home())


def default_cache():
    from envduels_dagster.core.models.call_cache import open_call_cache
    from envduels_dagster.settings.locations import cache_location

    return open_call_cache(cache_location())
