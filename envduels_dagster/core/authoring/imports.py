"""Imported EnvDuels exports as an author partition: names, environment ids and the staged copy.

Why an author partition: an import is materialized by a Dagster run like any authoring
(``authored_environments[import:<name>]``), so its environments appear in the asset's
history, are validated and checked the same way, and the request sensor plans their pairs
(the import x every registry model as solver) like a new author's. ``import:`` cannot clash
with a registry model (registry names never hold ``:``). The imported "author" has no model:
it is never a solver and is not hardened in later rounds (docs/DECISIONS.md).

Why a staged copy: the run (and any later re-materialization from the UI) reads the export
from ``$ENVDUELS_HOME/imports/<name>/latest``, a canonical copy the CLI wrote after the export
validated, never from the user's directory, which may have changed or gone. Each version is
named by the digest of its content; ``latest`` switches atomically.

Pure functions, no Dagster.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from envduels_dagster.core.protocol import EnvironmentSpec
from envduels_dagster.core.storage.location import switch_latest

IMPORT_PREFIX = "import:"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # as registry names (core/models/registry.py)
_UNSAFE_ID_CHARS = re.compile(r"[^A-Za-z0-9_.-]")


class ImportInputError(ValueError):
    """The export is well formed but cannot be imported as given (bad name, clashing ids)."""


def is_import(author: str) -> bool:
    return author.startswith(IMPORT_PREFIX)


def import_partition(name: str) -> str:
    """The author partition of import ``name``; raise ImportInputError for a name a partition cannot carry."""
    if not NAME_PATTERN.fullmatch(name):
        raise ImportInputError(f"import name {name!r} must match {NAME_PATTERN.pattern} (letters, digits, '_.-'); "
                               "give one with --author NAME")
    return IMPORT_PREFIX + name


def import_name(partition: str) -> str:
    if not is_import(partition):
        raise ImportInputError(f"{partition!r} is not an import partition ({IMPORT_PREFIX}<name>)")
    return partition[len(IMPORT_PREFIX):]


def import_name_for(specs: list[EnvironmentSpec], export_dir: str | Path, given: str | None = None) -> str:
    """The import's name: ``given``, else the manifest's author when every environment has the same valid one,
    else the export directory's name made partition-safe."""
    if given:
        return given
    authors = {s.author for s in specs}
    if len(authors) == 1 and NAME_PATTERN.fullmatch(author := authors.pop()):
        return author
    name = _UNSAFE_ID_CHARS.sub("_", Path(export_dir).resolve().name).lstrip("._-")[:64]
    return name or "export"


def import_groups(specs: list[EnvironmentSpec], export_dir: str | Path,
                  given: str | None = None) -> dict[str, list[EnvironmentSpec]]:
    """The imports an export makes, by name, each with its environments (manifest order kept).

    ``given`` (``--author``) forces one import of everything. An export with one author is one import
    (:func:`import_name_for`). An export holding several authors' environments (the paper's release is one)
    keeps them apart: one import per original author, named ``<export>.<author>`` (partition
    ``import:<export>.<author>``), so author value, rankings and training sets treat each like a registry
    author. Names that are not partition-safe, or authors that become the same name, are refused here,
    before anything is written.
    """
    if given is not None:  # '' too: an empty --author was ignored (issue 44)
        import_partition(given)  # refuse a bad --author before anything is written
        return {given: list(specs)}
    by_author: dict[str, list[EnvironmentSpec]] = {}
    for spec in specs:
        by_author.setdefault(spec.author, []).append(spec)
    if len(by_author) <= 1:
        return {import_name_for(specs, export_dir): list(specs)}
    base = import_name_for([], export_dir)  # the directory's name, partition-safe
    groups: dict[str, list[EnvironmentSpec]] = {}
    origin: dict[str, str] = {}
    for author, members in by_author.items():
        safe = _UNSAFE_ID_CHARS.sub("_", author).strip("._-") or "author"
        name = f"{base[:max(1, 63 - len(safe))]}.{safe}"[:64]
        if name in groups:
            raise ImportInputError(f"authors {origin[name]!r} and {author!r} both import as {IMPORT_PREFIX}{name}; "
                                   "give them names that differ in letters, digits or '_.-', or import everything "
                                   "as one author with --author NAME")
        import_partition(name)
        groups[name], origin[name] = members, author
    return groups


def namespaced(specs: list[EnvironmentSpec], partition: str, round_: int = 0) -> list[EnvironmentSpec]:
    """The export's environments as the import author's: ids ``<partition>.<id>`` (unique in the warehouse,
    safe as a directory name in training exports), the manifest's id and author kept in ``author_meta``."""
    out: list[EnvironmentSpec] = []
    seen: dict[str, str] = {}
    for spec in specs:
        env_id = f"{partition}.{_UNSAFE_ID_CHARS.sub('_', spec.env_id)}"
        if env_id in seen:
            raise ImportInputError(f"environments {seen[env_id]!r} and {spec.env_id!r} both import as {env_id!r}; "
                                   "give them ids that differ in letters, digits or '_.-'")
        seen[env_id] = spec.env_id
        meta = {**spec.author_meta, "imported_id": spec.env_id, "imported_author": spec.author}
        out.append(spec.model_copy(update={"env_id": env_id, "author": partition, "round": round_,
                                           "author_meta": meta}))
    return out


def content_digest(specs: list[EnvironmentSpec]) -> str:
    """A digest of what the import holds (ids, sources, hints, seeds, turns): the version it is recorded with."""
    fields = [[s.env_id, s.class_name, s.max_turns, s.domain, s.source_sha256, s.hint, s.benchmark_seeds]
              for s in specs]
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:12]


def imports_root(home: Path) -> Path:
    return home / "imports"


def staged_export(home: Path, name: str) -> Path:
    """Where the current staged copy of import ``name`` is (``<home>/imports/<name>/latest``)."""
    return imports_root(home) / name / "latest"


def stage_export(specs: list[EnvironmentSpec], home: Path, name: str) -> Path:
    """Write the (already loaded and checked) export as a canonical EnvDuels export under
    ``<home>/imports/<name>/<digest>`` and point ``latest`` at it; return that directory.

    Only what the manifest names is copied (sources, seeds, the hint), so the staged copy holds
    nothing the user's directory happened to contain besides. Staging the same content twice is a no-op.
    """
    root = imports_root(home) / name
    version = content_digest(specs)
    final = root / version
    if not final.exists():
        tmp = root / f".tmp-{version}"
        entries = []
        for i, spec in enumerate(specs):
            base = f"environments/{i:04d}"
            (tmp / base).mkdir(parents=True, exist_ok=True)
            (tmp / base / "env.py").write_bytes(spec.source.encode("utf-8"))
            (tmp / base / "metadata.json").write_text(json.dumps({"benchmark_seeds": spec.benchmark_seeds}))
            (tmp / base / "privileged.json").write_text(json.dumps({"environment_id": spec.env_id,
                                                                    "hints": {"hint": spec.hint}}))
            entries.append({"id": spec.env_id, "source": f"{base}/env.py", "source_sha256": spec.source_sha256,
                            "class_name": spec.class_name, "max_turns": spec.max_turns, "domain": spec.domain,
                            "author": spec.author, "metadata": f"{base}/metadata.json",
                            "privileged": f"{base}/privileged.json"})
        (tmp / "manifest.json").write_text(json.dumps({"format_version": 1, "environments": entries}, indent=2))
        tmp.rename(final)
    switch_latest(root, version)
    return final
