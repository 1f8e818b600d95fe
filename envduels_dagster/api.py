"""The small public API for downstream teams: find and load a learner's published training set.

    from envduels_dagster.api import load_training_set, latest_export_dir
    df = load_training_set("novice")          # one row per (environment, seed), prompt-style columns
    path = latest_export_dir("novice")        # EnvDuels v1 export + train.jsonl + train.parquet
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


def exports_root(home: str | Path | None = None) -> Path:
    from envduels_dagster.settings.locations import envduels_home

    return Path(home) / "exports" if home else envduels_home() / "exports"


def latest_export_dir(learner: str, home: str | Path | None = None) -> Path:
    """The newest complete export for ``learner`` (resolved, so it stays valid while you read it)."""
    link = exports_root(home) / learner / "latest"
    if not link.exists():
        raise FileNotFoundError(f"no published training set for learner {learner!r} under {link.parent}")
    return link.resolve()


def load_training_set(learner: str, home: str | Path | None = None, verify: bool = True) -> pd.DataFrame:
    """The learner's latest training rows (``train.parquet``), checked against their hashes by default."""
    import pandas as pd

    from envduels_dagster.core.training.export import verify_export

    root = latest_export_dir(learner, home)
    if verify:
        verify_export(root)
    return pd.read_parquet(root / "train.parquet")


def load_gym_rows(learner: str | None = None, home: str | Path | None = None,
                  export_dir: str | Path | None = None) -> list[dict]:
    """The multi-turn gym rows of ``train.jsonl`` with ``env_config.export_dir`` made absolute.

    Exports store it relative to the export root (they can be moved or shipped); this resolves it against
    where the export is now: ``export_dir`` if given, else the learner's latest export."""
    import json

    root = Path(export_dir).resolve() if export_dir else latest_export_dir(learner, home)
    rows = [json.loads(line) for line in (root / "train.jsonl").read_text().splitlines() if line.strip()]
    for row in rows:
        row["env_config"]["export_dir"] = str((root / row["env_config"]["export_dir"]).resolve())
    return rows
