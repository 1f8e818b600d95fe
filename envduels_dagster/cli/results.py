"""``envduels show`` and ``envduels report``: where results are, and episodes a person can read.

Why apart from ``cli.py``: these commands only read (the warehouse, read-only; the report's file); errors are
raised as ``UsageError`` and turned into one line and exit 2 by ``cli.main``.
"""

from __future__ import annotations

import argparse
import json
import sys


class UsageError(Exception):
    """Bad input (``cli_errors.describe`` maps any exception of this name to exit 2)."""


def _read_warehouse():
    """A read-only connection to this profile's warehouse, or a UsageError saying where it was looked for."""
    from envduels_dagster.settings.locations import storage_profile, warehouse, warehouse_path

    if storage_profile() != "shared" and not warehouse_path().is_file():
        raise UsageError(f"no warehouse at {warehouse_path()}: run the pipeline first (envduels demo), or set "
                         "ENVDUELS_HOME to the directory a demo or the UI used")
    return warehouse().connect(read_only=True)


def cmd_show(args: argparse.Namespace) -> int:
    """Print an environment's or a pair's episodes: a summary table first, then (--transcripts) cold and hinted
    of each seed side by side, turn by turn."""
    from envduels_dagster.core.play.transcripts import load, side_by_side_text, summary_text

    with _read_warehouse() as conn:
        try:
            envs, eps = load(conn, args.target, args.solver, args.seed, getattr(args, "round_", None))
        except LookupError as exc:
            raise UsageError(str(exc)) from None
    if args.json:
        for row in eps.to_dict("records"):
            row["transcript"] = json.loads(row["transcript"]) if isinstance(row["transcript"], str) else []
            print(json.dumps({k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}, default=str))
        return 0
    try:
        print(summary_text(eps))
        if getattr(args, "transcripts", False):
            print(side_by_side_text(envs, eps, width=args.width))
        else:
            print("(transcripts: the same command with --transcripts, or --json)")
    except BrokenPipeError:  # `envduels show ... | head`: the reader has what it wanted; exit quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Say where the experiment report is (asset experiment_report) and print its answer."""
    from envduels_dagster.assets.report.assets import report_dir

    path = report_dir() / "index.html"
    if not path.is_file():
        raise UsageError(f"no experiment report at {path}: materialize asset experiment_report (envduels demo "
                         "writes it; in the UI: asset experiment_report, Materialize)")
    print(f"Experiment report: {path}")
    print(f"  open it in a browser: {path.as_uri()}")
    if args.open:
        import webbrowser

        webbrowser.open(path.as_uri())
    return 0
