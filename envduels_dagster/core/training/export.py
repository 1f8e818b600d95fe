"""Publish a learner's training set as a versioned, atomically switched export.

Why versioned directories and a ``latest`` symlink: a trainer reading ``latest``
must never see a half-written export. We write into a hidden temporary directory,
verify it against the contract and its checksums, rename it into place, and only
then swap the symlink with an atomic ``os.replace``. A crash at any point leaves
the previous ``latest`` untouched; leftovers are removed by the next export.

Why a lock per learner: two exports of one learner at once (the automation sensor and a run from the
UI) used to each start by deleting every ``.tmp-*`` of the learner's folder, the other's export in
progress included (5 of 12 concurrent pairs failed with a raw FileNotFoundError, issue 33). Each export
now holds an exclusive ``flock`` on ``<learner>/.export.lock`` from its sweep to its publish, so exports of
one learner run one after the other and a sweep only ever sees leftovers of exports that died (the kernel
releases a dead process's lock). An export that fails removes its own temporary directory, nothing else.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envduels_dagster.core.protocol import SOLVER_SYSTEM_PROMPT, first_user_message, sha256_text
from envduels_dagster.core.storage.location import TMP_PREFIX, switch_latest
from envduels_dagster.core.training.contract import (
    EnvMetadata,
    GymEnvConfig,
    GymMessage,
    GymRow,
    Manifest,
    ManifestEntry,
    Privileged,
    PromptRow,
)

LOCK_NAME = ".export.lock"  # not a TMP_PREFIX name: never swept
CHECKSUMS = "SHA256SUMS"


class ExportIntegrityError(ValueError):
    pass


@dataclass
class ExportItem:
    """One training environment with its provenance and the cold first observation per seed."""

    env_id: str
    author: str
    domain: str
    class_name: str
    max_turns: int
    source: str
    source_sha256: str
    hint: str
    seeds: list[int]
    observations: dict[int, str]
    p_cold: float
    p_hint: float
    lift: float
    lift_lower: float
    lift_upper: float


def _write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data.encode() if isinstance(data, str) else data)
        fh.flush()
        os.fsync(fh.fileno())


def audit_against(manifest: Manifest, expected: dict[str, str]) -> list[str]:
    """What differs between an export's manifest and the training set it publishes (env_id -> source_sha256).

    Empty when they agree. The publication audit (before ``latest`` moves) and the blocking
    ``matches_training_set`` check (after) both use it, so they cannot disagree.
    """
    published = {e.id: e.source_sha256 for e in manifest.environments}
    missing, extra = sorted(set(expected) - set(published)), sorted(set(published) - set(expected))
    changed = sorted(k for k in set(expected) & set(published) if expected[k] != published[k])
    return [f"{label}: {', '.join(ids[:5])}" for label, ids in
            (("missing from the export", missing), ("not in training_set", extra), ("hash differs", changed)) if ids]


def write_export(learner_root: Path, learner: str, items: list[ExportItem], version: str,
                 on_file: Callable[[Path], None] | None = None, expected: dict[str, str] | None = None,
                 run_id: str = "") -> Path:
    """Write-audit-publish version ``version``; return its directory.

    Write: every file goes into a temporary directory. Audit: the files must verify against their
    SHA256SUMS and the data contract and, when ``expected`` (the training set's env_id -> source_sha256)
    is given, list exactly those environments. Publish: only then is the version renamed into place and
    ``latest`` switched. A failed audit raises ExportIntegrityError and leaves ``latest`` where it was.
    """
    learner_root.mkdir(parents=True, exist_ok=True)
    with learner_lock(learner_root):
        for stale in learner_root.glob(f"{TMP_PREFIX}*"):  # leftovers of a crashed export (none is running)
            shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)
        final = learner_root / version
        if final.exists():
            raise ExportIntegrityError(f"export version {version} already exists at {final}")
        tmp = learner_root / f"{TMP_PREFIX}{version}"
        tmp.mkdir()
        try:
            _stage(tmp, learner, items, version, on_file, expected, run_id)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)  # our own temporary directory, never another export's
            raise
        os.rename(tmp, final)
        switch_latest(learner_root, version)
    return final


@contextlib.contextmanager
def learner_lock(learner_root: Path):
    """Hold the learner's export lock (exclusive, blocking) for the body; released on exit or process death."""
    fd = os.open(learner_root / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _stage(tmp: Path, learner: str, items: list[ExportItem], version: str,
           on_file: Callable[[Path], None] | None, expected: dict[str, str] | None, run_id: str) -> None:
    """Write and audit version ``version`` in ``tmp`` (raise ExportIntegrityError when the audit fails)."""
    entries, gym_rows, prompt_rows = [], [], []
    for item in items:
        if sha256_text(item.source) != item.source_sha256:
            raise ExportIntegrityError(f"{item.env_id}: source does not match its recorded sha256")
        base = f"environments/{item.env_id}"
        files = {
            f"{base}/env.py": item.source,
            f"{base}/metadata.json": EnvMetadata(
                benchmark_seeds=item.seeds, learner=learner, p_cold=item.p_cold, p_hint=item.p_hint,
                lift=item.lift, lift_lower=item.lift_lower, lift_upper=item.lift_upper).model_dump_json(indent=2),
            f"{base}/privileged.json": Privileged(environment_id=item.env_id,
                                                  hints={"hint": item.hint}).model_dump_json(indent=2),
        }
        for rel, text in files.items():
            _write(tmp / rel, text)
            if on_file:
                on_file(tmp / rel)
        entries.append(ManifestEntry(id=item.env_id, source=f"{base}/env.py", source_sha256=item.source_sha256,
                                     class_name=item.class_name, max_turns=item.max_turns, domain=item.domain,
                                     author=item.author, metadata=f"{base}/metadata.json",
                                     privileged=f"{base}/privileged.json"))
        for seed in item.seeds:
            gym_rows.append(GymRow(messages=[GymMessage(role="user", content="<envduels-reset>")],
                                   env_config=GymEnvConfig(export_dir=".", env_id=item.env_id, seed=seed),
                                   env_id=item.env_id, seed=seed, export_version=version, run_id=run_id))
            prompt = [{"role": "system", "content": SOLVER_SYSTEM_PROMPT},
                      {"role": "user", "content": first_user_message(item.observations[seed], None)}]
            prompt_rows.append(PromptRow(env_id=item.env_id, seed=seed, author=item.author, ability=item.domain,
                                         prompt=json.dumps(prompt), hint=item.hint, max_turns=item.max_turns,
                                         source_sha256=item.source_sha256, lift=item.lift,
                                         export_version=version, run_id=run_id))
    _write(tmp / "manifest.json", Manifest(environments=entries).model_dump_json(indent=2))
    _write(tmp / "train.jsonl", "".join(r.model_dump_json() + "\n" for r in gym_rows))
    _write_parquet(tmp / "train.parquet", [r.model_dump() for r in prompt_rows])
    if on_file:
        on_file(tmp / "train.parquet")
    _write(tmp / CHECKSUMS, "".join(f"{_sha256_file(p)}  {p.relative_to(tmp)}\n"
                                    for p in sorted(tmp.rglob("*")) if p.is_file()))
    manifest = verify_export(tmp)
    if expected is not None and (problems := audit_against(manifest, expected)):
        raise ExportIntegrityError(f"export {version} for {learner} does not match its training set, not published: "
                                   + "; ".join(problems))


def _write_parquet(path: Path, rows: list[dict]) -> None:
    import duckdb
    import pandas as pd

    df = pd.DataFrame(rows, columns=list(PromptRow.model_fields))
    with duckdb.connect() as conn:
        conn.register("rows", df)
        conn.execute(f"COPY rows TO '{path}' (FORMAT PARQUET)")
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_export(root: Path) -> Manifest:
    """Check an export against its checksums and the contract; raise ExportIntegrityError naming the problem."""
    sums = root / CHECKSUMS
    if not sums.is_file():
        raise ExportIntegrityError(f"{root}: {CHECKSUMS} is missing")
    listed = {}
    for line in sums.read_text().splitlines():
        digest, rel = line.split("  ", 1)
        listed[rel] = digest
    present = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != CHECKSUMS}
    if missing := sorted(set(listed) - present):
        raise ExportIntegrityError(f"{root}: files listed in {CHECKSUMS} are missing: {', '.join(missing[:5])}")
    if extra := sorted(present - set(listed)):
        raise ExportIntegrityError(f"{root}: files not listed in {CHECKSUMS}: {', '.join(extra[:5])}")
    for rel, digest in listed.items():
        if _sha256_file(root / rel) != digest:
            raise ExportIntegrityError(f"{root}: {rel} does not match its sha256 in {CHECKSUMS}")
    manifest = Manifest.model_validate_json((root / "manifest.json").read_text())
    for entry in manifest.environments:
        if sha256_text((root / entry.source).read_text()) != entry.source_sha256:
            raise ExportIntegrityError(f"{root}: {entry.source} does not match source_sha256 in the manifest")
    for line in (root / "train.jsonl").read_text().splitlines():
        GymRow.model_validate_json(line)
    return manifest
