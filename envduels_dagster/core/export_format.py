"""Read and write the EnvDuels export format v1 (DESIGN §2).

Why strict: an export is untrusted input too. Paths must stay inside the export
root and every source must match its recorded sha256, or nothing is imported.
"""

from __future__ import annotations

import json
from pathlib import Path

from envduels_dagster.core.protocol import DEFAULT_SEEDS, EnvironmentSpec, sha256_text

FORMAT_VERSION = 1


class ExportFormatError(ValueError):
    pass


def _inside(root: Path, rel: str, what: str, env_id: str) -> Path:
    if not isinstance(rel, str) or not rel:
        raise ExportFormatError(f"environment {env_id!r}: {what} path is missing")
    path = (root / rel).resolve()
    if Path(rel).is_absolute() or not path.is_relative_to(root):
        raise ExportFormatError(f"environment {env_id!r}: {what} path {rel!r} escapes the export root")
    if not path.is_file():
        raise ExportFormatError(f"environment {env_id!r}: {what} file {rel!r} does not exist")
    return path


def load_export(root: str | Path) -> list[EnvironmentSpec]:
    """All environments of an export, unvalidated; raise ExportFormatError before returning any."""
    root = Path(root).resolve()
    manifest_path = root / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except FileNotFoundError:
        raise ExportFormatError(f"{root}: no manifest.json") from None
    except json.JSONDecodeError as exc:
        raise ExportFormatError(f"{manifest_path}: invalid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(manifest, dict) or manifest.get("format_version") != FORMAT_VERSION:
        raise ExportFormatError(f"{manifest_path}: format_version must be {FORMAT_VERSION}")
    specs = []
    for item in manifest.get("environments", []):
        env_id = str(item.get("id", "?"))
        source_path = _inside(root, item.get("source"), "source", env_id)
        source = source_path.read_text()
        if sha256_text(source) != item.get("source_sha256"):
            raise ExportFormatError(f"environment {env_id!r}: source_sha256 does not match {item.get('source')!r}")
        seeds = list(DEFAULT_SEEDS)
        if item.get("metadata"):
            meta = _read_json(_inside(root, item["metadata"], "metadata", env_id), env_id, "metadata")
            seeds = meta.get("benchmark_seeds", seeds)
            if not (isinstance(seeds, list) and seeds and all(isinstance(s, int) for s in seeds)):
                raise ExportFormatError(f"environment {env_id!r}: benchmark_seeds must be a non-empty list of ints")
        hint = ""
        if item.get("privileged"):
            priv = _read_json(_inside(root, item["privileged"], "privileged", env_id), env_id, "privileged")
            hints = priv.get("hints")
            if priv.get("environment_id") != item.get("id") or not isinstance(hints, dict):
                raise ExportFormatError(
                    f"environment {env_id!r}: privileged file must hold its environment_id and a 'hints' object")
            hint = hints.get("hint") or "\n".join(str(hints[k]) for k in sorted(hints) if k.startswith("hint_"))
        specs.append(EnvironmentSpec(
            env_id=env_id, author=str(item.get("author", "imported")), domain=str(item.get("domain", "unknown")),
            class_name=str(item["class_name"]), max_turns=int(item.get("max_turns", 10)), source=source,
            hint=hint, benchmark_seeds=seeds))
    return specs


def _read_json(path: Path, env_id: str, what: str) -> dict:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ExportFormatError(f"environment {env_id!r}: {what} file is not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ExportFormatError(f"environment {env_id!r}: {what} file must hold a JSON object")
    return data
