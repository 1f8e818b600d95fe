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
    # Relative to the export root (the directory holding train.jsonl): "." for this export, so an export
    # moves or ships as a whole; readers resolve it (``api.load_gym_rows``).
    export_dir: str
    env_id: str
    seed: Seed


class GymRow(BaseModel):
    messages: list[GymMessage]
    env_config: GymEnvConfig
    env_id: str
    seed: Seed
    export_version: str = ""  # the export directory's version name
    run_id: str = ""  # the Dagster run that published it


class PromptRow(BaseModel):
    """One row of train.parquet; ``prompt`` is the JSON list of chat messages a trainer starts from.

    Each field's description is the column's description in the catalog (``training_export``'s column schema)."""

    data_source: Literal["envduels"] = Field(default="envduels", description="Always envduels (verl's data_source).")
    env_id: str = Field(description="The environment (environments/<env_id>/ in the export).")
    seed: Seed = Field(description="The benchmark seed the episode starts from (unsigned 64-bit).")
    author: str = Field(description="The model that wrote the environment.")
    ability: str = Field(description="The environment's domain (verl's ability).")
    prompt: str = Field(description="JSON list of the chat messages a trainer starts from: the solver system "
                        "prompt and the first observation (no hint).")
    hint: str = Field(description="The author's privileged hint (for hinted or distillation training; not in prompt).")
    max_turns: int = Field(description="Turn limit of the environment.")
    source_sha256: str = Field(description="sha256 of the environment's source (as in manifest.json).")
    lift: float = Field(description="The learner's hint lift on the environment (p_hint - p_cold), its training_set rank key.")
    export_version: str = Field(default="", description="The export directory's version name.")
    run_id: str = Field(default="", description="The Dagster run that published the export.")


class TrainingSetRow(BaseModel):
    """One published row of ``training_set`` (snapshot published/training_set/<learner>.parquet).

    Extra columns are allowed: admission may add figures (e.g. a learnable probability) without a break."""

    model_config = ConfigDict(extra="allow")
    learner: str
    env_id: str
    author: str
    domain: str
    class_name: str
    max_turns: int = Field(ge=1)
    source_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    hint: str
    benchmark_seeds: list[Seed]
    n_seeds: int
    p_cold: float
    p_hint: float
    lift: float
    lift_lower: float
    lift_upper: float
    rank: int = Field(ge=1)
    run_id: str  # the run that produced this content
    data_version: str  # hash of the learner's rows (without provenance): Dagster's data version


def json_schemas() -> dict[str, dict]:
    return {m.__name__: m.model_json_schema() for m in (Manifest, EnvMetadata, Privileged, GymRow, PromptRow,
                                                     TrainingSetRow)}
