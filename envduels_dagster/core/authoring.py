"""Ask a model to author an environment, parse its reply, validate the result.

Why a forgiving parser: real models wrap code in prose and fences, or forget
the metadata block. Anything we cannot parse becomes a *rejected* environment
with the reason, never an exception that kills the author's whole batch.
The parser itself lives in ``core/replies.py`` (re-exported here).
"""

from __future__ import annotations

from envduels_dagster.core.models.contract import AuthorRequest, Prompt
from envduels_dagster.core.models.types import ChatGateway
from envduels_dagster.core.protocol import DEFAULT_SEEDS, EnvironmentSpec, sha256_text
from envduels_dagster.core.replies import AuthorReplyError, ParsedReply, parse_author_reply
from envduels_dagster.core.sandbox.limits import ALLOWED_MODULES_SENTENCE

__all__ = ["AUTHOR_BRIEF", "AUTHOR_SYSTEM_PROMPT", "AuthorReplyError", "ParsedReply", "author_environments",
           "author_messages", "make_env_id", "parse_author_reply", "spec_from_reply"]

AUTHOR_SYSTEM_PROMPT = (
    "You design interactive text environments that test other language-model agents. "
    "You write one Python class per environment, a privileged hint, and a reference solution."
)

AUTHOR_BRIEF = """Write one interactive environment as a single Python class.

Protocol (EnvDuels format v1):
- The class is constructed as Cls(max_turns=N).
- reset(seed) -> (observation: str, info: dict). The same seed must give the same game.
- step(action: str) -> (observation: str, reward: float, terminated: bool, truncated: bool, info: dict).
  The action arrives as the string "\\boxed{{ACTION}}". The episode succeeds when it ends with
  terminated=True and reward > 0. Stop with truncated=True after max_turns steps.
- Define reference_actions(self, seed) -> list[str]: actions (without \\boxed{{}}) that win the game for
  that seed within max_turns. It proves your environment is winnable on seeds {seeds}.
- {allowed}

What makes a good environment: a capable player usually FAILS it cold but PASSES it when given your
hint. The hint must reveal useful structure, never the literal answer.

Reply with the code in a ```python block followed by a ```json block:
{{"class_name": "...", "domain": "...", "hint": "...", "max_turns": N}}

Domain brief: {domain}
Environment slot: {slot} of {count}
"""


def author_messages(slot: int, count: int, domain: str = "any domain you like",
                    seeds: list[int] | tuple[int, ...] = DEFAULT_SEEDS) -> Prompt:
    """The authoring request: the brief as text, and the same request as data (``AuthorRequest``)."""
    user = AUTHOR_BRIEF.format(domain=domain, slot=slot, count=count, seeds=list(seeds),
                               allowed=ALLOWED_MODULES_SENTENCE)
    return Prompt([{"role": "system", "content": AUTHOR_SYSTEM_PROMPT}, {"role": "user", "content": user}],
                  AuthorRequest(slot=slot, count=count, domain=domain, seeds=tuple(seeds)))


def make_env_id(author: str, round_: int, slot: int, source: str) -> str:
    return f"{author}.r{round_}.{slot}.{sha256_text(source)[:8]}"


def spec_from_reply(author: str, slot: int, reply: str, seeds: list[int], round_: int = 0) -> EnvironmentSpec:
    """A spec ready for validation, or an already-rejected spec carrying the parse failure."""
    try:
        parsed = parse_author_reply(reply)
    except AuthorReplyError as exc:
        return EnvironmentSpec(env_id=make_env_id(author, round_, slot, reply), author=author, class_name="Unparsed",
                               max_turns=1, source=reply, hint="", benchmark_seeds=seeds, valid=False,
                               reject_reason=f"unparsable author reply: {exc}", round=round_)
    return EnvironmentSpec(env_id=make_env_id(author, round_, slot, parsed.source), author=author,
                           domain=parsed.domain, class_name=parsed.class_name, max_turns=parsed.max_turns,
                           source=parsed.source, hint=parsed.hint, benchmark_seeds=seeds, family=parsed.family,
                           round=round_, author_meta=parsed.meta or {})


async def author_environments(gateway: ChatGateway, author: str, count: int, seeds: list[int], limits=None,
                              round_: int = 0, domain: str = "any domain you like",
                              on_progress=None) -> list[EnvironmentSpec]:
    """Have ``author`` write ``count`` environments and validate each in the sandbox.

    An LLMError from the gateway propagates: an infrastructure failure must not be
    recorded as an author's invalid environment.
    """
    from envduels_dagster.core.costing import usage_fields
    from envduels_dagster.core.validation import validate_environment

    specs = []
    for slot in range(count):
        reply = await gateway.chat(author, author_messages(slot, count, domain, seeds), seed=slot)
        spec = spec_from_reply(author, slot, reply.text, seeds, round_).model_copy(
            update=usage_fields(gateway, author, reply))
        if spec.reject_reason is None:
            spec = await validate_environment(spec, limits)
        specs.append(spec)
        if on_progress is not None:
            on_progress(slot + 1, count, spec)
    return specs
