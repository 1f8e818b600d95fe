"""Pilot and in-process run wall time with 3 remote authors at a realistic authoring latency, before and after
every author is served at once (issue 41; docs/BENCHMARKS.md "Every author at once").

A real OpenAI-compatible endpoint on a thread (tests/helpers/restating_provider.py) answers each authoring call
after ``--latency`` seconds (default 30) with a real-size game; play calls are answered at once. For each code
tree given (``--tree LABEL=PATH``: a checkout of this repository, e.g. a temporary ``git worktree`` of an older
commit; default: this checkout as "new"), in one invocation, side by side: ``envduels plan --pilot --yes``, then
``envduels demo`` on a fresh home (no call cache: it pays its authoring again), each timed from outside.
Each run: 3 authors x ``--envs`` environments (one wave), 1 seed, no hardening, one learner.

    .venv/bin/python benchmarks/authoring_at_once.py --tree old=/tmp/old-checkout --tree new=.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers.restating_provider import registry_text, restating_provider  # noqa: E402

ENVDUELS = shutil.which("envduels", path=str(Path(sys.executable).parent)) or "envduels"


def timed(command: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([ENVDUELS, *command], env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"{command} failed: {done.stderr[-2000:]}")
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", default=[], help="LABEL=PATH of a checkout to run (repeatable)")
    parser.add_argument("--latency", type=float, default=30.0, help="seconds per authoring call")
    parser.add_argument("--envs", type=int, default=1, help="environments per author")
    args = parser.parse_args()
    trees = [t.split("=", 1) for t in args.tree] or [["new", str(ROOT)]]
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.1f} (shared machine); "
          f"3 authors x {args.envs} environment(s), {args.latency:g} s per authoring call")
    with restating_provider(author_latency_s=args.latency) as (base, _), tempfile.TemporaryDirectory() as tmp:
        registry = Path(tmp) / "models.yaml"
        registry.write_text(registry_text(base, ("a1", "a2", "a3")))
        for label, path in trees:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVDUELS_", "DAGSTER_"))}
            env.update(PYTHONPATH=str(Path(path).resolve()), ENVDUELS_REGISTRY=str(registry),
                       ENVDUELS_ENVS_PER_AUTHOR=str(args.envs), ENVDUELS_SEEDS="1", ENVDUELS_ROUNDS="0",
                       ENVDUELS_AUTHOR_DUPLICATE_THRESHOLD="off")
            pilot = timed(["plan", "--pilot", "--yes"], {**env, "ENVDUELS_HOME": f"{tmp}/{label}-pilot"})
            demo = timed(["demo"], {**env, "ENVDUELS_HOME": f"{tmp}/{label}-demo"})
            print(f"{label:>4}: pilot {pilot:6.1f} s, in-process run (demo) {demo:6.1f} s   ({path})", flush=True)


if __name__ == "__main__":
    main()
