"""The model registry: which models duel, how to reach them, what they cost.

Why a file and not code: adding a model must be a one-line change that the
new-models sensor can notice. Keys never live here, only the *name* of the
environment variable that holds one.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from envduels_dagster.project_files import project_file

FAST_PREFIXES = ("openai", "hosted_vllm")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# The checkout's models.yaml, or the copy an installed wheel carries (envduels_dagster/project_files.py).
DEFAULT_REGISTRY = project_file("models.yaml")


class RegistryError(ValueError):
    """A registry problem, always naming the file, and the entry and field when known."""

    def __init__(self, path: str | Path, message: str, entry: str | None = None, field: str | None = None):
        where = str(path)
        if entry is not None:
            where += f": entry {entry}"
        if field is not None:
            where += f": field '{field}'"
        super().__init__(f"{where}: {message}")
        self.path, self.entry, self.field = str(path), entry, field


class ModelEntry(BaseModel):
    """One model. Only ``name`` and ``model`` are required; defaults are documented in the README."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    model: str  # <prefix>/<model>: a litellm model string, or a registered provider's (envduels-sim/<profile>)
    api_base: str | None = None
    api_key_env: str | None = None  # NAME of the variable holding the key, never the key
    version: str = "1"
    pool: str | None = None  # provider label for concurrency limits; defaults to the model prefix
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(1024, ge=1, le=200_000)
    max_concurrency: int = Field(8, ge=1, le=1024)
    requests_per_minute: float | None = Field(None, gt=0)  # provider rate limit, shared by the pool in a run
    # Client path: "auto" takes the lean HTTP client for OpenAI-compatible servers given by api_base
    # (openai/... or hosted_vllm/...), litellm for everything else.
    client: Literal["auto", "litellm", "fast"] = "auto"
    # The endpoint is an `envduels serve-sim` server: send the engine's typed request next to the
    # messages (body field envduels_request). Never set it for a real provider (docs/DECISIONS.md).
    request_contract: bool = False
    input_cost_per_mtok: float = Field(0.0, ge=0.0)
    output_cost_per_mtok: float = Field(0.0, ge=0.0)

    @field_validator("name")
    @classmethod
    def _name_is_partition_safe(cls, v: str) -> str:
        if not NAME_PATTERN.match(v):
            raise ValueError("must be 1-64 letters, digits, '_', '.' or '-' (it becomes a Dagster partition key)")
        return v

    @field_validator("model")
    @classmethod
    def _model_has_provider(cls, v: str) -> str:
        if "/" not in v:
            raise ValueError("must look like 'provider/model' (e.g. openai/gpt-4o-mini or envduels-sim/expert)")
        from envduels_dagster.core.models.providers import check_model_string  # (imports the registry)

        check_model_string(v)  # a registered provider may reject the model (e.g. an unknown simulated profile)
        return v

    @model_validator(mode="after")
    def _contract_needs_a_server(self) -> ModelEntry:
        if self.request_contract and not self.api_base:
            raise ValueError("request_contract is for envduels serve-sim endpoints: it needs an api_base")
        return self

    @property
    def is_simulated(self) -> bool:
        """Served in-process by a provider that declares itself simulated (no key, no network)."""
        from envduels_dagster.core.models.providers import is_simulated

        return is_simulated(self.model)

    @property
    def uses_fast_client(self) -> bool:
        openai_compatible = self.model.split("/", 1)[0] in FAST_PREFIXES and bool(self.api_base)
        if self.client == "fast" and not openai_compatible:
            raise ValueError(f"model {self.name!r}: client 'fast' needs an openai/ or hosted_vllm/ model with api_base")
        return self.client == "fast" or (self.client == "auto" and openai_compatible)

    @property
    def provider(self) -> str:
        return self.pool or self.model.split("/", 1)[0]

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_cost_per_mtok + completion_tokens * self.output_cost_per_mtok) / 1e6


class Registry(BaseModel):
    path: str
    models: list[ModelEntry]

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.models]

    def get(self, name: str) -> ModelEntry:
        for m in self.models:
            if m.name == name:
                return m
        raise RegistryError(self.path, f"no model named {name!r}; known: {', '.join(self.names)}")

    def api_key(self, name: str) -> str | None:
        """Read the key from its environment variable at call time; never stored anywhere."""
        entry = self.get(name)
        if entry.api_key_env is None:
            return None
        value = os.environ.get(entry.api_key_env)
        if not value:
            raise RegistryError(
                self.path, f"environment variable {entry.api_key_env} is not set", entry=repr(name), field="api_key_env"
            )
        return value


def registry_path(path: str | Path | None = None) -> Path:
    return Path(path or os.environ.get("ENVDUELS_REGISTRY") or DEFAULT_REGISTRY)


def load_registry(path: str | Path | None = None) -> Registry:
    """Load and validate the registry; raise RegistryError naming file, entry and field."""
    p = registry_path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise RegistryError(p, f"cannot read the registry: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise RegistryError(p, f"invalid YAML{at}: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        raise RegistryError(p, "expected a mapping with a 'models' list at the top level")
    unknown_top = set(data) - {"models"}
    if unknown_top:
        raise RegistryError(p, f"unknown top-level key(s): {', '.join(sorted(unknown_top))}")
    models: list[ModelEntry] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(data["models"], start=1):
        label = f"#{i}" + (f" ({raw.get('name')!r})" if isinstance(raw, dict) and raw.get("name") else "")
        if not isinstance(raw, dict):
            raise RegistryError(p, "each entry must be a mapping", entry=label)
        try:
            entry = ModelEntry(**raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(x) for x in err["loc"]) or None
            msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
            raise RegistryError(p, msg, entry=label, field=field) from None
        if entry.name in seen:
            raise RegistryError(p, f"duplicate name (also entry #{seen[entry.name]})", entry=label, field="name")
        seen[entry.name] = i
        models.append(entry)
    if not models:
        raise RegistryError(p, "the registry lists no models")
    return Registry(path=str(p), models=models)


def dump_entry(entry: ModelEntry) -> dict[str, Any]:
    """The entry as a flat row for tables (no secrets exist in an entry by design)."""
    # request_contract is a transport detail of serve-sim endpoints, not a column of model_registry
    return {**entry.model_dump(exclude={"request_contract"}), "provider": entry.provider,
            "simulated": entry.is_simulated}
