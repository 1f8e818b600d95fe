"""The data contract of a training export: what downstream trainers may rely on.

Why pydantic: the same models validate what we write (before it is published)
and document the format (``json_schemas()`` gives JSON Schema for non-Python users).
Layout of one export version (EnvDuels format v1 plus trainer files):

    manifest.json                      Manifest
    environments/<id>/env.py           the source (sha256 in the manifest)
    environments/<id>/metadata.json    EnvMetadata (benchmark_seeds + provenance)
    environments/<id>/privileged.json  Privileged ({"environment_id", "hints": {"hint": ...}})
    train.jsonl                        GymRow per (environment, seed): multi-turn RL (ms-swift gym style)
    train.parquet                      PromptRow per (environment, seed): prompt-style (verl / TRL style)
    SHA256SUMS                         sha256 of every file above
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from envduels_dagster.core.protocol import Seed  # unsigned 64-bit: 0..2**64-1


class ManifestEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    source: str
    source_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    class_name: str
    max_turns: int = Field(ge=1)
    domain: str
    split: Literal["train", "test", "validation"] = "train"
    author: str
    metadata: str
    privileged: str


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format_version: Literal[1] = 1
    environments: list[ManifestEntry]


class EnvMetadata(BaseModel):
    benchmark_seeds: list[Seed] = Field(min_length=1)
    learner: str
    p_cold: float
    p_hint: float
    lift: float
    lift_lower: float
    lift_upper: float


class Privileged(BaseModel):
    environment_id: str
    hints: dict[str, str]


class GymMessage(BaseModel):
    role: Literal["user"]
    content: Literal["<envduels-reset>"]


class GymEnvConfig(BaseModel):
    name: Literal["envduels"] = "envduels"
    export_dir: str
    env_id: str
    seed: Seed


class GymRow(BaseModel):
    messages: list[GymMessage]
    env_config: GymEnvConfig
    env_id: str
    seed: Seed


class PromptRow(BaseModel):
    """One row of train.parquet; ``prompt`` is the JSON list of chat messages a trainer starts from."""

    data_source: Literal["envduels"] = "envduels"
    env_id: str
    seed: Seed
    author: str
    ability: str  # the environment's domain
    prompt: str
    hint: str
    max_turns: int
    source_sha256: str
    lift: float


def json_schemas() -> dict[str, dict]:
    return {m.__name__: m.model_json_schema() for m in (Manifest, EnvMetadata, Privileged, GymRow, PromptRow)}
