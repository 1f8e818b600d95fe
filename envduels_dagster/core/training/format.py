"""Read and write the EnvDuels export format v1 (DESIGN §2).

Why strict: an export is untrusted input too. Paths must stay inside the export
root and every source must match its recorded sha256, or nothing is imported.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from envduels_dagster.core.protocol import (
    DEFAULT_SEEDS,
    MAX_HINT_BYTES,
    MAX_JSON_FILE_BYTES,
    MAX_SOURCE_BYTES,
    EnvironmentSpec,
    seed_problem,
    seeds_problem,
    size_problem,
)

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
    entries = manifest.get("environments", [])
    if not isinstance(entries, list):
        raise ExportFormatError(f"{manifest_path}: 'environments' must be a list")
    specs = []
    seen: dict[str, int] = {}
    for index, item in enumerate(entries, start=1):
        if not isinstance(item, dict):
            raise ExportFormatError(f"{manifest_path}: environment #{index} must be a JSON object")
        env_id = str(item.get("id", f"#{index}"))
        for key in ("id", "source", "source_sha256", "class_name"):
            if key not in item:
                raise ExportFormatError(f"environment {env_id!r}: manifest entry lacks {key!r}")
        if env_id in seen:  # two entries, one id: validated with exit 0 and one silently replaced the other
            raise ExportFormatError(f"{manifest_path}: environments #{seen[env_id]} and #{index} share the id "
                                    f"{env_id!r}; give each environment its own id")
        seen[env_id] = index
        if isinstance(item.get("max_turns"), bool):  # JSON true was read as max_turns 1
            raise ExportFormatError(f"environment {env_id!r}: max_turns must be an integer 1..200, got "
                                    f"{json.dumps(item['max_turns'])}")
        source_path = _inside(root, item.get("source"), "source", env_id)
        _fits(source_path, MAX_SOURCE_BYTES, env_id, f"source {item.get('source')!r}")
        raw = source_path.read_bytes()  # hash the bytes as written: read_text() would translate CRLF
        if hashlib.sha256(raw).hexdigest() != item.get("source_sha256"):
            raise ExportFormatError(f"environment {env_id!r}: source_sha256 does not match {item.get('source')!r}")
        try:
            source = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ExportFormatError(f"environment {env_id!r}: source is not UTF-8 ({exc.reason})") from None
        seeds = list(DEFAULT_SEEDS)
        if item.get("metadata"):
            meta = _read_json(_inside(root, item["metadata"], "metadata", env_id), env_id, "metadata")
            seeds = meta.get("benchmark_seeds", seeds)
            if not (isinstance(seeds, list) and seeds):
                raise ExportFormatError(f"environment {env_id!r}: {item['metadata']}: benchmark_seeds must be a "
                                        "non-empty list of ints (unsigned 64-bit: 0..2**64-1)")
            for k, seed in enumerate(seeds):
                if (problem := seed_problem(seed)) is not None:
                    raise ExportFormatError(f"environment {env_id!r}: {item['metadata']}: benchmark_seeds[{k}] "
                                            f"{problem}; give seeds as JSON integers in 0..2**64-1")
            if (problem := seeds_problem(seeds)) is not None:  # a set, and at most MAX_BENCHMARK_SEEDS of them
                raise ExportFormatError(f"environment {env_id!r}: {item['metadata']}: {problem}")
        hint = ""
        if item.get("privileged"):
            priv = _read_json(_inside(root, item["privileged"], "privileged", env_id), env_id, "privileged")
            hints = priv.get("hints")
            if priv.get("environment_id") != item.get("id") or not isinstance(hints, dict):
                raise ExportFormatError(
                    f"environment {env_id!r}: privileged file must hold its environment_id and a 'hints' object")
            hint = hints.get("hint") or "\n".join(str(hints[k]) for k in sorted(hints) if k.startswith("hint_"))
            if (problem := size_problem("the hint", len(str(hint).encode()), MAX_HINT_BYTES)) is not None:
                raise ExportFormatError(f"environment {env_id!r}: {item['privileged']}: {problem}")
        try:
            specs.append(EnvironmentSpec(
                env_id=env_id, author=str(item.get("author", "imported")), domain=str(item.get("domain", "unknown")),
                class_name=str(item["class_name"]), max_turns=item.get("max_turns", 10), source=source,
                hint=hint, benchmark_seeds=seeds))
        except ValueError as exc:  # pydantic ValidationError: e.g. max_turns not an integer or outside 1..200
            err = exc.errors()[0] if hasattr(exc, "errors") else None
            what = f"{'.'.join(map(str, err['loc']))}: {err['msg']}" if err else str(exc)
            raise ExportFormatError(f"environment {env_id!r}: {what}") from None
    return specs


def _fits(path: Path, limit: int, env_id: str, what: str) -> None:
    """Refuse a file larger than ``limit`` before reading it."""
    if (problem := size_problem(what, path.stat().st_size, limit)) is not None:
        raise ExportFormatError(f"environment {env_id!r}: {problem}")


def _read_json(path: Path, env_id: str, what: str) -> dict:
    _fits(path, MAX_JSON_FILE_BYTES, env_id, f"{what} file {path.name!r}")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ExportFormatError(f"environment {env_id!r}: {what} file is not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ExportFormatError(f"environment {env_id!r}: {what} file must hold a JSON object")
    return data
