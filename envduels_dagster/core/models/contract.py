"""The request contract between the engine and its models: what a call *means*, as typed data.

Why: the prompt text is for language models and may be reworded freely; a simulated model
(or any backend that wants it) reads the intent and parameters from these objects instead of
from the wording. Real providers never see them: they receive exactly the messages. Over HTTP
the request travels only to endpoints the registry declares as envduels serve-sim servers
(``request_contract: true``), as the body field ``envduels_request`` (docs/DECISIONS.md).
Requests are not part of the call cache key: every field is derived from the same inputs as
the messages, so equal messages mean equal requests.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

WIRE_FIELD = "envduels_request"  # the body field serve-sim reads the request from


class _Request(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AuthorRequest(_Request):
    """Write environment ``slot`` of ``count`` for ``domain``, winnable on ``seeds``; ``family``: this slot's
    domain family, ``earlier``: titles of the author's earlier designs it must not repeat (issue 31)."""

    kind: Literal["author"] = "author"
    slot: int
    count: int
    domain: str
    seeds: tuple[int, ...]
    family: str = ""
    earlier: tuple[str, ...] = ()


class PeerRates(_Request):
    """How one other solver played the parent environment (success rates over its seeds)."""

    solver: str
    cold: float
    hinted: float


class HardenRequest(_Request):
    """Round ``round``: harden (or keep) the parent environment given how the peer panel played it."""

    kind: Literal["harden"] = "harden"
    slot: int
    round: int
    parent_env_id: str
    parent_meta: dict[str, Any]  # the parent's metadata exactly as the brief shows it
    parent_valid: bool
    reject_reason: str | None = None
    seeds: tuple[int, ...]
    peer_rates: tuple[PeerRates, ...] = ()  # solvers with both a cold and a hinted rate only


class SolveRequest(_Request):
    """Play environment ``env_id`` from its first ``observation``; ``hint`` only in the hinted condition."""

    kind: Literal["solve"] = "solve"
    env_id: str
    condition: Literal["cold", "hinted"]
    observation: str
    hint: str | None = None
    max_turns: int


ModelRequest = Annotated[AuthorRequest | HardenRequest | SolveRequest, Field(discriminator="kind")]
_ADAPTER: TypeAdapter = TypeAdapter(ModelRequest)


def to_wire(request: AuthorRequest | HardenRequest | SolveRequest) -> dict[str, Any]:
    return request.model_dump(mode="json")


def from_wire(data: Any) -> AuthorRequest | HardenRequest | SolveRequest:
    """Parse a wire request; raises ``ValueError`` (pydantic's ValidationError) naming the bad field."""
    return _ADAPTER.validate_python(data)


class Prompt(list):
    """Chat messages that also carry the typed request they express.

    It *is* the plain list of ``{"role", "content"}`` dicts real providers receive (the gateway
    passes a plain copy on), so every caller that handles messages keeps working, and a request
    built next to its prompt text cannot get separated from it on the way to the gateway.
    """

    __slots__ = ("request",)

    def __init__(self, messages: list[dict[str, str]], request: AuthorRequest | HardenRequest | SolveRequest):
        super().__init__(messages)
        self.request = request
