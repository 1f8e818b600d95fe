"""The ``envduels`` command line. Heavy imports happen inside each command."""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import sys
from pathlib import Path


def _cmd_models(args: argparse.Namespace) -> int:
    from envduels_dagster.core.registry import load_registry, registry_path

    if args.registry_path:
        print(registry_path())
        return 0
    registry = load_registry()
    for entry in registry.models:
        print(entry.name if args.names else f"{entry.name}\t{entry.model}\tversion={entry.version}")
    return 0


def _find_class(source: str, path: Path) -> str:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)
               and {"reset", "step"} <= {f.name for f in n.body if isinstance(f, ast.FunctionDef)}]
    if len(classes) != 1:
        raise UsageError(f"{path}: found {len(classes)} environment classes; name one with --class")
    return classes[0]


class UsageError(Exception):
    pass


def _load_specs(args: argparse.Namespace):
    from envduels_dagster.core.export_format import load_export
    from envduels_dagster.core.protocol import DEFAULT_SEEDS, EnvironmentSpec

    path = Path(args.path)
    if path.is_dir():
        return load_export(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such file or directory")
    source = path.read_text()
    class_name = args.class_name or _find_class(source, path) or "Environment"
    return [EnvironmentSpec(env_id=path.stem, author="local", class_name=class_name, max_turns=args.max_turns,
                            source=source, hint=args.hint or "", benchmark_seeds=args.seed or list(DEFAULT_SEEDS))]


def _cmd_validate(args: argparse.Namespace) -> int:
    from envduels_dagster.core.export_format import ExportFormatError
    from envduels_dagster.core.validation import validate_environment

    try:
        specs = _load_specs(args)
    except ExportFormatError as exc:
        # A malformed or tampered export is rejected input (exit 1, with the reason), not a usage error.
        if args.json:
            print(json.dumps({"env_id": None, "valid": False, "reason": str(exc), "winnability": "unproven"}))
        else:
            print(f"{args.path}: REJECTED: {exc}")
        return 1
    results = [asyncio.run(validate_environment(s)) for s in specs]
    for r in results:
        out = {"env_id": r.env_id, "valid": r.valid, "reason": r.reject_reason, "winnability": r.winnability}
        if args.json:
            print(json.dumps(out))
        else:
            print(f"{r.env_id}: " + ("valid" if r.valid else f"REJECTED: {r.reject_reason}")
                  + (f" (winnability {r.winnability})" if r.valid else ""))
    return 0 if all(r.valid for r in results) else 1


def _cmd_play(args: argparse.Namespace) -> int:
    from envduels_dagster.core.episodes import play_episode
    from envduels_dagster.core.models import Gateway
    from envduels_dagster.core.registry import load_registry

    registry = load_registry()
    registry.get(args.model)
    spec = _load_specs(argparse.Namespace(**{**vars(args), "seed": [args.seed_one]}))[0]
    condition = "hinted" if spec.hint else "cold"
    rec = asyncio.run(play_episode(Gateway(registry, _default_cache()), args.model, spec, args.seed_one, condition))
    if args.json:
        print(json.dumps(rec.model_dump(exclude={"transcript"} if not args.transcript else set())))
    else:
        print(f"{rec.status} after {rec.turns} turn(s) ({rec.stop_reason}); format errors {rec.format_errors}"
              + (f"; error: {rec.error}" if rec.error else ""))
    return 0 if rec.status != "incomplete" else 1


def _default_cache():
    from envduels_dagster.core.cache import CallCache
    from envduels_dagster.settings import cache_path

    return CallCache(cache_path())


def _cmd_import(args: argparse.Namespace) -> int:
    """Import an EnvDuels export into the warehouse: all-or-nothing, each environment validated."""
    import datetime as dt

    import duckdb

    from envduels_dagster.core.export_format import load_export
    from envduels_dagster.core.validation import validate_environment
    from envduels_dagster.core.warehouse import environments_frame, replace_rows
    from envduels_dagster.settings import warehouse_path

    specs = load_export(args.path)  # raises before anything is written
    if args.author:
        specs = [s.model_copy(update={"author": args.author}) for s in specs]
    checked = [asyncio.run(validate_environment(s)) for s in specs]
    df = environments_frame(checked, "imported", dt.datetime.now(dt.timezone.utc).replace(tzinfo=None))
    with duckdb.connect(str(warehouse_path())) as conn:
        replace_rows(conn, "environments", df, {"env_id": [s.env_id for s in checked]})
    for s in checked:
        out = {"env_id": s.env_id, "author": s.author, "valid": s.valid, "reason": s.reject_reason}
        print(json.dumps(out) if args.json else f"{s.env_id} ({s.author}): "
              + ("valid" if s.valid else f"REJECTED: {s.reject_reason}"))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from envduels_dagster.demo import run_demo

    return run_demo(envs_per_author=args.envs_per_author, seeds=args.seeds)


def _cmd_ui(args: argparse.Namespace) -> int:
    from envduels_dagster.demo import open_ui

    return open_ui(args.host, args.port)


def _cmd_serve_sim(args: argparse.Namespace) -> int:
    import os

    from envduels_dagster.sim.server import ServerConfig, serve

    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    serve(args.host, args.port, ServerConfig(latency_ms=args.latency_ms, fault_rate=args.fault_rate, seed=args.seed,
                                             timeout_fault_s=args.timeout_fault_s, api_key=key))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="envduels", description="EnvDuels on Dagster")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("models", help="list the registry's models")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--names", action="store_true", help="print model names, one per line")
    g.add_argument("--registry-path", action="store_true", help="print the registry file in use")
    p.set_defaults(func=_cmd_models)

    for name, func, helptext in (("validate", _cmd_validate, "validate an environment file or EnvDuels export"),
                                 ("play", _cmd_play, "play one episode of an environment with a model")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("path")
        p.add_argument("--class", dest="class_name")
        p.add_argument("--max-turns", type=int, default=10)
        p.add_argument("--hint")
        p.add_argument("--json", action="store_true")
        if name == "validate":
            p.add_argument("--seed", type=int, action="append", help="benchmark seed (repeatable)")
        else:
            p.add_argument("--model", required=True)
            p.add_argument("--seed", dest="seed_one", type=int, default=0)
            p.add_argument("--transcript", action="store_true", help="include the transcript in --json output")
        p.set_defaults(func=func)

    p = sub.add_parser("import", help="import an EnvDuels export directory into the warehouse (validated)")
    p.add_argument("path")
    p.add_argument("--author", help="record the environments under this author instead of the manifest's")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_import)

    p = sub.add_parser("demo", help="run the whole pipeline on the simulated models through Dagster")
    p.add_argument("--envs-per-author", type=int, default=3)
    p.add_argument("--seeds", type=int, default=4)
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser("serve-sim", help="serve the simulated models over an OpenAI-compatible HTTP API")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765, help="0 picks a free port (printed on start)")
    p.add_argument("--latency-ms", type=float, default=0.0)
    p.add_argument("--fault-rate", type=float, default=0.0, help="share of requests that fail (429/500/timeout/"
                                                                  "malformed)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fault sequence")
    p.add_argument("--timeout-fault-s", type=float, default=30.0, help="how long an injected timeout hangs")
    p.add_argument("--api-key-env", help="require the key held in this environment variable")
    p.set_defaults(func=_cmd_serve_sim)

    p = sub.add_parser("ui", help="open the Dagster UI on the project's instance")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=3000)
    p.set_defaults(func=_cmd_ui)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from envduels_dagster.core.export_format import ExportFormatError
    from envduels_dagster.core.registry import RegistryError

    try:
        return args.func(args)
    except (UsageError, ExportFormatError) as exc:
        print(f"envduels: error: {exc}", file=sys.stderr)
        return 2
    except RegistryError as exc:
        print(f"envduels: registry error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
