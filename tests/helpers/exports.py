"""An external export directory in the training-set format (one environment, ``SOURCE``, echoing seed % 7) with the
benchmark seeds given: what ``envduels import`` reads."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from envduels_dagster.core.protocol import sha256_text

SOURCE = textwrap.dedent('''
    class Echo:
        def __init__(self, max_turns=2):
            self.max_turns = max_turns
        def reset(self, seed):
            self.answer = str(seed % 7)
            return f"seed={seed}", {}
        def step(self, action):
            ok = self.answer in action
            return ("yes" if ok else "no"), float(ok), ok, not ok, {}
        def reference_actions(self, seed):
            return [str(seed % 7)]
''')


def write_export_dir(root: Path, seeds) -> Path:
    (root / "e").mkdir(parents=True)
    (root / "e" / "env.py").write_text(SOURCE)
    (root / "e" / "meta.json").write_text(json.dumps({"benchmark_seeds": seeds}))
    (root / "e" / "priv.json").write_text(json.dumps({"environment_id": "echo", "hints": {"hint": "mod 7"}}))
    entry = {"id": "echo", "source": "e/env.py", "source_sha256": sha256_text(SOURCE), "class_name": "Echo",
             "max_turns": 2, "domain": "arithmetic", "split": "test", "author": "ext", "metadata": "e/meta.json",
             "privileged": "e/priv.json"}
    (root / "manifest.json").write_text(json.dumps({"format_version": 1, "environments": [entry]}))
    return root
