"""The ``envduels`` command line. Heavy imports happen inside each command.

Why one error boundary (``main``): a user of a command line should read one line saying what went
wrong, where, and what to do, never a traceback, and scripts need exit codes they can branch on:
0 success, 1 a rejected environment or a failed run, 2 bad input (arguments, files, exports,
registry), 130 interrupted. ``--debug`` prints the traceback as well. docs/INPUTS.md lists the
messages.
"""

from __future__ import annotations

import argparse
import sys

from envduels_dagster.cli import run as run_command
from envduels_dagster.cli.envs import cmd_play, cmd_validate
from envduels_dagster.cli.errors import UsageError  # re-exported: tests and commands raise it
from envduels_dagster.cli.importing import cmd_import
from envduels_dagster.cli.options import add_size_options, float_in, int_in
from envduels_dagster.cli.results import cmd_report, cmd_show

EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 1, 2, 130
SPENDING = ("demo", "run", "play", "plan")  # commands that call models under ENVDUELS_BUDGET_USD


def _cmd_models(args: argparse.Namespace) -> int:
    from envduels_dagster.core.models.registry import load_registry
    from envduels_dagster.settings.locations import registry_file

    if args.registry_path:
        print(registry_file())
        return 0
    registry = load_registry(registry_file())
    for entry in registry.models:
        print(entry.name if args.names else
              f"{entry.name}\t{entry.model}\tversion={entry.version}\troles={','.join(entry.roles)}")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the command and pointing at its --help."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"envduels: error: {self.prog}: {message} (see '{self.prog} --help')\n")


class _Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default, except where there is none to show (None, False); keeps the examples' lines."""

    def _get_help_string(self, action):
        if action.default in (None, False) or action.default is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


SEED = int_in(0, 2**64 - 1, "seed", "0..2**64-1")  # unsigned 64-bit, as everywhere (protocol.Seed)
MAX_TURNS = int_in(1, 200, "--max-turns")
PORT = int_in(0, 65535, "port")


def _cmd_demo(args: argparse.Namespace) -> int:
    """Progress goes to stdout; Dagster's own failure logs (tracebacks) go to a file named in the error."""
    import contextlib
    import io

    from envduels_dagster.cli.demo import run_demo
    from envduels_dagster.settings.locations import envduels_home

    sizes = {"envs_per_author": args.envs_per_author, "seeds": args.seeds, "rounds": args.rounds, "yes": args.yes}
    if args.debug:
        return run_demo(**sizes)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return run_demo(**sizes)
    except Exception as exc:
        if not captured.getvalue():
            raise
        log = envduels_home() / "logs" / "demo-failure.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(captured.getvalue())
        raise (type(exc)(f"{exc}; Dagster's log of the failure: {log}") if isinstance(exc, RuntimeError) else exc) from exc


def _cmd_ui(args: argparse.Namespace) -> int:
    from envduels_dagster.cli.ui import open_ui

    return open_ui(args.host, args.port)


def _cmd_serve_sim(args: argparse.Namespace) -> int:
    import os

    from envduels_dagster.sim.server import ServerConfig, serve

    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    if args.api_key_env and not key:  # it served without any key (issue 33): refuse rather than serve open
        raise UsageError(f"--api-key-env {args.api_key_env}: that variable is not set or empty; export the key "
                         "in it, or leave --api-key-env out to serve without a key")
    serve(args.host, args.port, ServerConfig(latency_ms=args.latency_ms, fault_rate=args.fault_rate, seed=args.seed,
                                             timeout_fault_s=args.timeout_fault_s, api_key=key, rpm=args.rpm,
                                             rpm_burst=args.rpm_burst,
                                             latency_sigma=args.latency_sigma, reasoning_tokens=args.reasoning_tokens,
                                             hostile=args.hostile, max_in_flight=args.max_in_flight))
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    from envduels_dagster.cli.plan import run_plan

    return run_plan(args)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="envduels", description="EnvDuels on Dagster")
    parser.add_argument("--version", action="version", version=f"envduels {_version()}")
    parser.add_argument("--debug", action="store_true", help="print the traceback of an error as well")
    debug = _Parser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def add(name: str, examples: tuple[str, ...] = (), **kwargs) -> argparse.ArgumentParser:
        """A subcommand whose --help starts with a description (``help`` unless given) and ends with examples
        (tests/flows/test_cli_help.py runs every one of them)."""
        kwargs.setdefault("formatter_class", _Help)
        kwargs.setdefault("description", kwargs.get("help"))
        if examples:
            kwargs.setdefault("epilog", "examples:\n" + "\n".join(f"  {e}" for e in examples))
        return sub.add_parser(name, parents=[debug], **kwargs)  # --debug after the command works too

    p = add("models", help="list the registry's models (name, model, version, roles), one per line",
            examples=("envduels models", "envduels models --names"))
    g = p.add_mutually_exclusive_group()
    g.add_argument("--names", action="store_true", help="print model names, one per line")
    g.add_argument("--registry-path", action="store_true", help="print the registry file in use")
    p.set_defaults(func=_cmd_models)

    for name, func, helptext in (("validate", cmd_validate, "validate an environment file or EnvDuels export"),
                                 ("play", cmd_play, "play one episode of an environment with a model")):
        example = ("envduels validate my_env.py --seed 0 --seed 1" if name == "validate" else
                   "envduels play my_env.py --model novice --hint 'the code is sorted' --transcript")
        p = add(name, help=helptext, examples=(example,))
        p.add_argument("path", help="an environment .py file, or an EnvDuels export directory (manifest.json)")
        p.add_argument("--class", dest="class_name", help="the environment class (default: the one class with "
                       "reset and step)")
        p.add_argument("--max-turns", type=MAX_TURNS, default=10, help="turn limit, 1..200")
        p.add_argument("--hint", help="the privileged hint (play: plays hinted when given, else cold)")
        p.add_argument("--json", action="store_true", help="one JSON object per result")
        if name == "validate":
            p.add_argument("--seed", type=SEED, action="append",
                           help="benchmark seed, 0..2**64-1 (repeatable; default: the standard seeds)")
        else:
            p.add_argument("--model", required=True, help="a registry model name (envduels models --names)")
            p.add_argument("--seed", dest="seed_one", type=SEED, default=0, help="the seed to play, 0..2**64-1")
            p.add_argument("--transcript", action="store_true",
                           help="also print the conversation (as text, or in the --json object)")
        p.set_defaults(func=func)

    p = add("import", help="import an EnvDuels export directory through Dagster (author partition import:NAME)",
            description="Import an EnvDuels export directory (manifest.json, as training_export writes) through "
                        "Dagster: checked first (nothing is written on bad input), then validated by an import_job "
                        "run as author partition import:NAME; the request sensor has every solver play it.",
            examples=("envduels import my_export --author alice",))
    p.add_argument("path", help="an EnvDuels export directory (holding manifest.json)")
    p.add_argument("--author", metavar="NAME", help="import everything as one author partition import:NAME "
                   "(default: the manifest's author when all environments share one; several authors each get "
                   "import:<dir>.<author>)")
    p.add_argument("--json", action="store_true", help="one JSON object per imported environment (its verdict)")
    p.set_defaults(func=cmd_import)

    demo_help = ("the offline demo: the whole pipeline on the simulated models through Dagster (a real, paid "
                 "experiment: envduels run)")
    p = add("demo", help=demo_help,
            description="Run the offline demo: the whole pipeline through Dagster on the registry's models (by "
                        "default the five simulated ones: offline, free) into ENVDUELS_HOME: authoring, play, marts, author value, "
                        "training sets and the experiment report (envduels report says where). Its sizes are stored "
                        "with the experiment ($ENVDUELS_HOME/experiment.json) for the UI, plan and later runs; for a "
                        "real, paid experiment use envduels run.",
            examples=("envduels demo --envs-per-author 1 --seeds 2",))
    add_size_options(p)
    p.add_argument("--yes", action="store_true", help="change the experiment's stored sizes without asking")
    p.set_defaults(func=_cmd_demo)
    run_command.add_parser(add)

    p = add("plan", help="what the configured experiment will spend (calls, tokens, dollars, hours) before it runs",
            examples=("envduels plan --envs-per-author 2 --seeds 4", "envduels plan --json --defaults-only"))
    add_size_options(p)
    p.add_argument("--defaults-only", action="store_true",
                   help="ignore rates measured by earlier runs in the warehouse")
    p.add_argument("--compare", nargs="?", const="", default=None, metavar="PLAN.json",
                   help="compare the newest kept plan (or PLAN.json) with what the warehouse says was used")
    p.add_argument("--pilot", action="store_true",
                   help="first run a pilot (the run's own authoring and a slice of its play, priced before it "
                        "starts), then plan from what it measured")
    p.add_argument("--yes", action="store_true", help="with --pilot: run it without asking")
    p.add_argument("--json", action="store_true", help="the plan as one JSON object")
    p.set_defaults(func=_cmd_plan)

    p = add("serve-sim", help="serve the simulated models over an OpenAI-compatible HTTP API",
            description="Serve the simulated models over an OpenAI-compatible HTTP API (POST /v1/chat/completions), "
                        "optionally with latency, faults and a rate limit, until Ctrl-C; point a registry entry's "
                        "api_base at it to drive the real HTTP path offline.",
            examples=("envduels serve-sim --port 0 --latency-ms 50 --fault-rate 0.1",))
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=PORT, default=8765, help="port to listen on; 0 picks a free port (printed on start)")
    p.add_argument("--latency-ms", type=float_in(0.0, None, "--latency-ms"), default=0.0,
                   help="added latency per reply, in milliseconds")
    p.add_argument("--fault-rate", type=float_in(0.0, 1.0, "--fault-rate"), default=0.0,
                   help="share of requests that fail (429/500/timeout/malformed)")
    p.add_argument("--seed", type=SEED, default=0, help="seed of the fault sequence")
    p.add_argument("--timeout-fault-s", type=float_in(0.0, None, "--timeout-fault-s"), default=30.0,
                   help="how long an injected timeout hangs")
    p.add_argument("--api-key-env", help="require the key held in this environment variable")
    p.add_argument("--rpm", type=float_in(0.0, None, "--rpm"), default=None,
                   help="hold a requests-per-minute limit: past it, 429 with Retry-After (as a provider account; 0: none)")
    p.add_argument("--rpm-burst", type=float_in(1.0, None, "--rpm-burst"), default=None,
                   help="requests the --rpm bucket holds at once (default: one second's worth)")
    p.add_argument("--latency-sigma", type=float_in(0.0, 5.0, "--latency-sigma"), default=0.0,
                   help="latency ~ --latency-ms x lognormal(0, sigma): a provider's long tail")
    p.add_argument("--reasoning-tokens", type=int_in(0, 1_000_000, "--reasoning-tokens"), default=0,
                   help="reply as a reasoning model spending this many tokens first (finish_reason length "
                        "past max_tokens)")
    p.add_argument("--max-in-flight", type=int_in(1, 100_000, "--max-in-flight"), default=None,
                   help="hold a limit of calls in flight: past it, 429 (GET /health counts them either way)")
    p.add_argument("--hostile", choices=("huge", "gzip-bomb"), default=None,
                   help="answer every completion with a 512 MB body or a gzip bomb (bounded-reply tests)")
    p.set_defaults(func=_cmd_serve_sim)

    p = add("show", help="print an environment's or a pair's episodes: a summary table, then transcripts on request",
            description="Print the episodes of an environment or of a pair: first a summary table (environment, "
                        "seed, cold and hinted outcome, turns, reward), then, with --transcripts, the cold and "
                        "hinted conversations of each seed side by side. Environment ids carry a hash suffix: "
                        "the summary of a pair lists them.",
            examples=("envduels show 'oracle|novice'", "envduels show 'oracle|novice' --seed 0 --transcripts"))
    p.add_argument("target", metavar="TARGET",
                   help="an environment id (as the summary of a pair lists it) or a pair 'AUTHOR|SOLVER' (quoted)")
    p.add_argument("--solver", help="only this solver's episodes (default: every solver that played it)")
    p.add_argument("--seed", type=SEED, help="only this benchmark seed (default: every seed)")
    p.add_argument("--round", type=int_in(0, 100, "--round"), default=None, dest="round_",
                   help="only this hardening round (default: every round)")
    p.add_argument("--transcripts", action="store_true",
                   help="after the summary, print each seed's cold and hinted conversation side by side")
    p.add_argument("--width", type=int_in(40, 400, "--width"), default=120, help="line width of the two columns")
    p.add_argument("--json", action="store_true", help="one JSON object per episode, with its transcript")
    p.set_defaults(func=cmd_show)

    p = add("report", help="print where the experiment report is (asset experiment_report)",
            description="Print where the experiment report is (a self-contained HTML file written by asset "
                        "experiment_report) and its file:// link; --open also opens it in the default browser.",
            examples=("envduels report",))
    p.add_argument("--open", action="store_true", help="also open it in the default browser")
    p.set_defaults(func=cmd_report)

    p = add("ui", help="open the Dagster UI on the project's instance",
            description="Start the Dagster UI and daemon (dagster dev) on the project's instance (DAGSTER_HOME "
                        "under ENVDUELS_HOME) and print its address; Ctrl-C or SIGTERM stops it and every process "
                        "it started.",
            examples=("envduels ui --port 0",))
    p.add_argument("--host", default="127.0.0.1", help="address the UI listens on")
    p.add_argument("--port", type=PORT, default=3000, help="port the UI listens on; 0 picks a free port (printed)")
    p.set_defaults(func=_cmd_ui)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("envduels-dagster")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # usage errors: one line, exit 2 (_Parser.error)
    try:
        from envduels_dagster.cli.interrupts import quiet_interrupts
        from envduels_dagster.settings.variables import check_settings

        check_settings()  # every ENVDUELS_* range, before any command writes or spends anything (exit 2)
        if args.command in SPENDING:  # a bad ENVDUELS_BUDGET_USD: exit 2 before an instance or run exists (issue 44)
            from envduels_dagster.settings.variables import budget_cap

            budget_cap()
        if args.command == "ui":  # `ui` stops its own process tree (dagster dev and its children)
            return args.func(args)
        with quiet_interrupts():  # SIGTERM as Ctrl-C; no thread's traceback (interrupts.py)
            return args.func(args)
    except KeyboardInterrupt:
        _report(args, "interrupted", EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED
    except Exception as exc:  # the one boundary: every failure becomes one line and an exit code
        from envduels_dagster.cli.errors import describe
        from envduels_dagster.cli.interrupts import is_interrupt

        if is_interrupt(exc):  # a run that failed because it was interrupted (import waiting on a busy warehouse)
            _report(args, "interrupted", EXIT_INTERRUPTED)
            return EXIT_INTERRUPTED

        message, code = describe(exc, args)
        _report(args, message, code)
        return code
    except BaseException as exc:
        # Ctrl-C inside a Dagster step arrives as DagsterExecutionInterruptedError, a BaseException like
        # KeyboardInterrupt but not one: it ended with a traceback and exit 1 instead of the documented 130.
        if type(exc).__name__ != "DagsterExecutionInterruptedError":
            raise
        _report(args, "interrupted", EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED


def _report(args: argparse.Namespace, message: str, code: int) -> None:
    if getattr(args, "debug", False):
        import traceback

        traceback.print_exc()
    elif code != EXIT_BAD_INPUT and code != EXIT_INTERRUPTED:
        message += " (run again with --debug for the traceback)"
    print(f"envduels: error: {message}", file=sys.stderr)

