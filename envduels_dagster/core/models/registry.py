"""The model registry: which models duel, how to reach them, what they cost.

Why a file and not code: adding a model must be a one-line change that the
new-models sensor can notice. Keys never live here, only the *name* of the
environment variable that holds one.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from envduels_dagster.core.storage.project_files import project_file

FAST_PREFIXES = ("openai", "hosted_vllm")


_SCIENTIFIC = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def _openai_compatible(model: str, api_base: str | None) -> bool:
    """An OpenAI-compatible server the lean client can speak to: an openai/ or hosted_vllm/ model with api_base."""
    return model.split("/", 1)[0] in FAST_PREFIXES and bool(api_base)
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # used with fullmatch: "$" admits a trailing newline
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")  # an environment variable's name (fullmatch)
# A value of api_key_env that is a key pasted in place of its variable's name (issue 47): refused at load, before
# the registry reaches the model_registry table, and never echoed (the message names the field, not the value).
KEY_PREFIX = re.compile(r"(sk|pk|rk|hf|ghp|gho|ghs|gsk|xai|github_pat|glpat|AIza)[-_]?[A-Za-z0-9_-]{16,}")
NUMBER_FIELDS = ("temperature", "max_tokens", "max_concurrency", "requests_per_minute", "input_cost_per_mtok",
                 "output_cost_per_mtok", "budget_usd", "timeout_s", "reasoning_cost_per_mtok", "tokens_per_minute",
                 "max_in_flight", "max_reply_bytes")
# Limits of the provider account, held per pool (gateway.py, limits.py, in_flight.py): entries of one pool must agree.
POOL_LIMITS = ("requests_per_minute", "tokens_per_minute", "max_in_flight")
Role = Literal["author", "solver"]
ROLES: tuple[Role, ...] = ("author", "solver")
# A provider option whose name looks like a credential is refused: keys come only from api_key_env.
SECRET_PARAM = re.compile(r"(key|secret|password|token$|authorization|bearer|credential)", re.IGNORECASE)
RESERVED_PARAMS = frozenset({"model", "messages", "api_base", "base_url", "api_key", "headers", "extra_headers",
                             "stream", "n", "seed", "timeout", "temperature", "max_tokens"})
DEFAULT_MAX_REPLY_BYTES = 8 * 1024 * 1024
# Ceilings no provider's list price or limit comes near (issue 44: a price of 1e308 passed, and `play --json`
# printed "cost_usd": Infinity, `plan` "$inf"): a typo of a few zeros is refused instead of breaking sums.
MAX_PRICE_PER_MTOK = 10_000.0  # US dollars per million tokens (the dearest list prices are ~$150-600)
MAX_BUDGET_USD = 10_000_000.0
MAX_PER_MINUTE = 1_000_000.0  # requests per minute
MAX_TOKENS_PER_MINUTE = 1e10
# The checkout's models.yaml, or the copy an installed wheel carries (envduels_dagster/core/storage/project_files.py):
# the registry when no other is named (settings/locations.registry_file).
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
    requests_per_minute: float | None = Field(None, gt=0, le=MAX_PER_MINUTE, allow_inf_nan=False)  # provider limit
    # Client path: "auto" takes the lean HTTP client for OpenAI-compatible servers given by api_base
    # (openai/... or hosted_vllm/...), litellm for everything else: for providers.LEAN_LITELLM_PROVIDERS litellm
    # formats and the lean transport sends (litellm_lean.py), "litellm-full" keeps litellm.acompletion for them.
    client: Literal["auto", "litellm", "litellm-full", "fast"] = "auto"
    # The endpoint is an `envduels serve-sim` server: send the engine's typed request next to the
    # messages (body field envduels_request). Never set it for a real provider (docs/DECISIONS.md).
    request_contract: bool = False
    input_cost_per_mtok: float = Field(0.0, ge=0.0, le=MAX_PRICE_PER_MTOK, allow_inf_nan=False)
    output_cost_per_mtok: float = Field(0.0, ge=0.0, le=MAX_PRICE_PER_MTOK, allow_inf_nan=False)
    # --- the practitioner's experiment (issue 30) ---
    # What the model does: "author" writes environments, "solver" plays them. A solver-only model is a
    # target learner that writes nothing; an author-only model writes and never plays.
    roles: tuple[Role, ...] = ROLES
    budget_usd: float | None = Field(None, gt=0, le=MAX_BUDGET_USD, allow_inf_nan=False)  # cap for this model's calls
    # --- real providers (issue 31) ---
    timeout_s: float = Field(60.0, gt=0, le=3600, allow_inf_nan=False)  # per call; reasoning models need minutes
    params: dict[str, Any] = Field(default_factory=dict)  # provider options passed as given (plain JSON values)
    reasoning_cost_per_mtok: float | None = Field(None, ge=0.0, le=MAX_PRICE_PER_MTOK,
                                                  allow_inf_nan=False)  # None: priced as output
    tokens_per_minute: float | None = Field(None, gt=0, le=MAX_TOKENS_PER_MINUTE,
                                            allow_inf_nan=False)  # provider TPM limit, per pool
    # Calls in flight for the pool across all pairs of a run (issue 35); None: max_concurrency.
    max_in_flight: int | None = Field(None, ge=1, le=4096)
    # Cap on one reply's body, raw and decompressed: past it the call fails as malformed (issue 31).
    max_reply_bytes: int = Field(DEFAULT_MAX_REPLY_BYTES, ge=1024, le=1 << 30)

    @field_validator(*NUMBER_FIELDS, mode="before")
    @classmethod
    def _numbers_are_numbers(cls, v: Any) -> Any:
        # YAML's true/false and quoted numbers were taken as 1/0 and parsed text (max_tokens: true -> 1).
        # Scientific notation YAML 1.1 leaves as text (1e308, 2.5e3: no dot or no exponent sign) is a number.
        if isinstance(v, str) and _SCIENTIFIC.fullmatch(v.strip()):
            return v.strip()
        if isinstance(v, bool) or isinstance(v, str):
            raise ValueError(f"must be a number, not {'true/false' if isinstance(v, bool) else 'text'}")
        return v

    @field_validator("request_contract", mode="before")
    @classmethod
    def _flags_are_booleans(cls, v: Any) -> Any:
        if not isinstance(v, bool):
            raise ValueError(f"must be true or false, not {type(v).__name__}")
        return v

    @field_validator("version", mode="before")
    @classmethod
    def _version_is_a_label(cls, v: Any) -> Any:
        if isinstance(v, int | float) and not isinstance(v, bool):  # version: 1.10 would read as 1.1
            raise ValueError(f"must be text: quote it (version: '{v}') so that YAML does not read it as a number")
        if isinstance(v, str) and (not v or v != v.strip() or len(v) > 64 or not v.isprintable()):
            raise ValueError("must be 1-64 printable characters without surrounding spaces (it is stored with "
                             "every environment the model writes, and a change re-authors them)")
        return v

    @field_validator("pool")
    @classmethod
    def _pool_is_a_label(cls, v: str | None) -> str | None:
        if v is not None and not NAME_PATTERN.fullmatch(v):
            raise ValueError("must be 1-64 letters, digits, '_', '.' or '-' (it names a provider's shared limits)")
        return v

    @field_validator("api_key_env")
    @classmethod
    def _key_env_is_a_variable_name(cls, v: str | None) -> str | None:
        if v is None:
            return v
        letters = [c for c in v if c.isalpha()]
        mixed = any(c.islower() for c in letters) and any(c.isupper() for c in letters)
        if KEY_PREFIX.fullmatch(v) or (len(v) >= 32 and mixed and any(c.isdigit() for c in v)) \
                or (not ENV_NAME.fullmatch(v) and len(v) >= 20):
            raise ValueError("looks like a key itself: put the key in an environment variable and write that "
                             "variable's NAME here (e.g. OPENAI_API_KEY); the value was not stored")
        if not ENV_NAME.fullmatch(v):
            raise ValueError("must be the NAME of an environment variable: letters, digits and '_', not starting "
                             "with a digit (e.g. OPENAI_API_KEY)")
        return v

    @field_validator("name")
    @classmethod
    def _name_is_partition_safe(cls, v: str) -> str:
        if not NAME_PATTERN.fullmatch(v):
            raise ValueError("must be 1-64 letters, digits, '_', '.' or '-' (it becomes a Dagster partition key)")
        return v

    @field_validator("model")
    @classmethod
    def _model_has_provider(cls, v: str) -> str:
        prefix, _, rest = v.partition("/")
        if not prefix.strip() or not rest.strip() or v != v.strip():
            raise ValueError("must look like 'provider/model' (e.g. openai/gpt-4o-mini or envduels-sim/expert)")
        if any(c.isspace() or not c.isprintable() for c in v):  # a newline inside was accepted (issue 44)
            raise ValueError(f"must not contain spaces, newlines or control characters, got {v!r}")
        from envduels_dagster.core.models.providers import check_model_string  # (imports the registry)

        check_model_string(v)  # a registered provider may reject the model (e.g. an unknown simulated profile)
        return v

    @field_validator("api_base")
    @classmethod
    def _api_base_is_http(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"https?://[^\s/?#]+(/[^\s]*)?", v):
            raise ValueError("must be an http:// or https:// URL (e.g. http://127.0.0.1:8000/v1)")
        return v

    @field_validator("client")
    @classmethod
    def _fast_client_needs_an_openai_server(cls, v: str, info: ValidationInfo) -> str:
        # Checked at load, with the rest of the entry (it used to fail only at the entry's first call).
        model, api_base = info.data.get("model"), info.data.get("api_base")
        if v == "fast" and model is not None and not _openai_compatible(model, api_base):
            raise ValueError("'fast' needs an openai/ or hosted_vllm/ model with api_base "
                             "(the lean client speaks only the OpenAI-compatible HTTP API)")
        return v

    @field_validator("roles", mode="before")
    @classmethod
    def _roles_are_a_set(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = [v]
        if isinstance(v, (list, tuple)):
            if not v:
                raise ValueError("needs at least one of 'author', 'solver'")
            if len(set(v)) != len(v):
                raise ValueError(f"lists a role twice: {list(v)}")
            return tuple(r for r in ROLES if r in v) + tuple(r for r in v if r not in ROLES)  # canonical order
        return v

    @field_validator("params")
    @classmethod
    def _params_are_plain_json(cls, v: dict[str, Any]) -> dict[str, Any]:
        def walk(value: Any, where: str) -> None:
            if isinstance(value, dict):
                for k, item in value.items():
                    if not isinstance(k, str):
                        raise ValueError(f"{where}: keys must be strings")
                    if SECRET_PARAM.search(k):
                        raise ValueError(f"{where}{k}: looks like a credential; keys come only from api_key_env")
                    walk(item, f"{where}{k}.")
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    walk(item, f"{where}[{i}].")
            elif isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{where.rstrip('.')}: must be a finite number")
            elif value is not None and not isinstance(value, (str, int, float, bool)):
                raise ValueError(f"{where.rstrip('.')}: must be a plain JSON value, not {type(value).__name__}")

        extra_body = v.get("extra_body")
        if extra_body is not None and not isinstance(extra_body, dict):
            raise ValueError("extra_body: must be a mapping of request body fields")
        # extra_body's fields land in the request body too: the same names are the engine's there
        reserved = sorted(RESERVED_PARAMS & set(v)) + [f"extra_body.{k}" for k in sorted(RESERVED_PARAMS & set(
            extra_body or {}))]
        if reserved:
            raise ValueError(f"{', '.join(reserved)} is set by the engine or the registry, not by params")
        walk(v, "")
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
        return self.client == "fast" or (self.client == "auto" and _openai_compatible(self.model, self.api_base))

    @property
    def provider(self) -> str:
        return self.pool or self.model.split("/", 1)[0]

    @property
    def authors(self) -> bool:
        return "author" in self.roles

    @property
    def solves(self) -> bool:
        return "solver" in self.roles

    def cost(self, prompt_tokens: int, completion_tokens: int, reasoning_tokens: int = 0) -> float:
        """List price of a call; ``reasoning_tokens`` are the part of the completion spent reasoning."""
        reasoning_price = self.output_cost_per_mtok if self.reasoning_cost_per_mtok is None \
            else self.reasoning_cost_per_mtok
        visible = completion_tokens - reasoning_tokens
        return (prompt_tokens * self.input_cost_per_mtok + visible * self.output_cost_per_mtok
                + reasoning_tokens * reasoning_price) / 1e6


class Registry(BaseModel):
    path: str
    models: list[ModelEntry]

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.models]

    @property
    def authors(self) -> list[str]:
        """Models with the author role: the ones that get authoring partitions."""
        return [m.name for m in self.models if m.authors]

    @property
    def solvers(self) -> list[str]:
        """Models with the solver role: the ones that play, and get training sets and author values."""
        return [m.name for m in self.models if m.solves]

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


def load_registry(path: str | Path) -> Registry:
    """Load and validate the registry file ``path``; raise RegistryError naming file, entry and field.

    Which file (a flag, ENVDUELS_REGISTRY, the experiment's stored one, ./models.yaml) is the caller's choice:
    ``settings.locations.registry_file()`` makes it; the engine reads no variable itself."""
    p = Path(path)
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
            # the whole entry is checked: every field in error is named, the first one in RegistryError.field
            problems = [(".".join(str(x) for x in err["loc"]) or None,
                         "unknown key" if err["type"] == "extra_forbidden"
                         else err["msg"].removeprefix("Value error, ")) for err in exc.errors()]
            field, msg = problems[0]
            msg += "".join(f"; field '{f}': {m}" for f, m in problems[1:])
            raise RegistryError(p, msg, entry=label, field=field) from None
        if entry.name in seen:
            raise RegistryError(p, f"duplicate name (also entry #{seen[entry.name]})", entry=label, field="name")
        seen[entry.name] = i
        models.append(entry)
    if not models:
        raise RegistryError(p, "the registry lists no models")
    _pools_agree(p, models)
    return Registry(path=str(p), models=models)


def _pools_agree(path: Path, models: list[ModelEntry]) -> None:
    """Entries sharing a pool share its account limits: two entries that set one to different values contradict
    each other (which one held depended on which entry was called first)."""
    first: dict[tuple[str, str], tuple[int, ModelEntry]] = {}
    for i, entry in enumerate(models, start=1):
        for field in POOL_LIMITS:
            if getattr(entry, field) is None:
                continue
            j, other = first.setdefault((entry.provider, field), (i, entry))
            if getattr(entry, field) != getattr(other, field):
                raise RegistryError(path, f"pool {entry.provider!r} has {field} = {getattr(other, field)} in entry "
                                    f"#{j} ({other.name!r}) but {getattr(entry, field)} here: entries of one pool "
                                    "share the provider account's limits, so give them the same value (or different "
                                    "pools)", entry=f"#{i} ({entry.name!r})", field=field)


def dump_entry(entry: ModelEntry) -> dict[str, Any]:
    """The entry as a flat row for tables (no secrets exist in an entry by design)."""
    # request_contract is a transport detail of serve-sim endpoints, not a column of model_registry
    row = entry.model_dump(exclude={"request_contract"})
    # list/dict fields as text, so the table keeps one scalar per column
    row["roles"] = ",".join(entry.roles)
    row["params"] = json.dumps(entry.params, sort_keys=True)
    return {**row, "provider": entry.provider, "simulated": entry.is_simulated}
