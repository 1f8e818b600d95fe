"""Ask a model to author an environment, parse its reply, validate the result.

Why a forgiving parser: real models wrap code in prose and fences, or forget
the metadata block. Anything we cannot parse becomes a *rejected* environment
with the reason, never an exception that kills the author's whole batch.
The parser itself lives in ``core/authoring/reply_parsing.py`` (re-exported here).
"""

from __future__ import annotations

from collections.abc import Sequence

from envduels_dagster.core.authoring.duplicates import duplicate_reason, find_duplicate
from envduels_dagster.core.authoring.plan import DEFAULT_DOMAIN, AuthoringPlan, design_title
from envduels_dagster.core.authoring.reply_parsing import AuthorReplyError, ParsedReply, parse_author_reply
from envduels_dagster.core.concurrency.gather import gather_or_cancel
from envduels_dagster.core.models.contract import AuthorRequest, Prompt
from envduels_dagster.core.models.types import ChatGateway
from envduels_dagster.core.protocol import DEFAULT_SEEDS, EnvironmentSpec, sha256_text
from envduels_dagster.core.sandbox.limits import ALLOWED_MODULES_SENTENCE

__all__ = ["AUTHOR_BRIEF", "AUTHOR_BRIEF_V1", "AUTHOR_SYSTEM_PROMPT", "PROMPT_VERSION", "AuthorReplyError", "ParsedReply",
           "author_environments", "author_messages", "author_messages_v1", "make_env_id", "parse_author_reply",
           "spec_from_reply"]

AUTHOR_SYSTEM_PROMPT = (
    "You design interactive text environments that test other language-model agents. "
    "You write one Python class per environment, a privileged hint, and a reference solution."
)

# Version 1, frozen: the prompt the real-model corpus answered (../shared/real-model-corpus, authoring-v1)
# and the bytes the simulated authors' draws are still seeded from (sim/model.py), so their documented
# results do not move when the wording below changes.
AUTHOR_BRIEF_V1 = """Write one interactive environment as a single Python class.

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

# Version 2 answers, in a line or two each, what real authors asked about version 1 and what a real
# player of their games ran into (docs/DECISIONS.md "Authoring prompt version 2").
# Version 3 (issue 42) is version 2 without the batch size ("slot 3 of 10" became "slot 3"): the prompt of a slot
# no longer changes when an experiment grows, so a larger run (envduels run --until-decided's waves) takes every
# earlier slot's call, and the play on what it wrote, from the call cache instead of paying for them again.
PROMPT_VERSION = "author-v3"
AUTHOR_BRIEF = """Write one interactive environment as a single Python class.

Protocol (EnvDuels format v1):
- The harness constructs Cls(max_turns=N) with N from your JSON; give the constructor the same default.
  Module-level imports, constants and helper functions are fine; the class named in the JSON is the game.
- reset(seed) -> (observation: str, info: dict). seed is always an int (0 to 2**64-1), never None.
  The same seed must give the same game; each reset starts a new game on a fresh instance.
- step(action: str) -> (observation: str, reward: float, terminated: bool, truncated: bool, info: dict).
  The action arrives as the string "\\boxed{{ACTION}}". A win ends with terminated=True and reward > 0;
  a loss ends with terminated=True and reward 0. Stop with truncated=True after max_turns steps.
- Every step() is one turn, the final answer included: 3 questions and an answer need max_turns >= 4.
  A malformed or illegal action also uses a turn: return an observation saying why, never raise. A reply
  without \\boxed{{}} uses a turn without reaching step(). step() is never called after the game ended.
- The player sees only the observations (never info). The first one must state the goal, the action format
  and the turn budget, and every observation must reflect the current state. Hidden rules are the point,
  but if observations can be wrong or misleading, say so in the rules (the hint may say how).
- Define reference_actions(self, seed) -> list[str]: actions (without \\boxed{{}}) that win the game for
  that seed within max_turns. It proves the game is winnable, not that it is fair: it may read the hidden
  state. It is called on a fresh instance before any reset(), so compute from the seed (calling
  self.reset(seed) inside is fine). It must win seeds {seeds}.
- Every call (constructor, reset, step, reference_actions) must return within a few seconds.
- {allowed}

What makes a good environment: a capable player (another language model, playing one action per turn)
usually FAILS it cold but PASSES it when given your hint. The hint is one fixed string shown for every
seed: reveal structure that holds for all seeds, never the literal answer (a hint that spells out the
reference actions is rejected).

Reply with the code in a ```python block followed by a ```json block (prose around them is ignored):
{{"class_name": "...", "domain": "...", "hint": "...", "max_turns": N}}
The hint is a JSON string: write a backslash as \\\\ (so \\\\boxed) and a double quote as \\".

Domain brief: {domain}
{earlier}Environment slot: {slot}
"""
EARLIER_DESIGNS = ("You already wrote these environments in this batch. Do not repeat these designs: a near-copy "
                   "of one is rejected as a duplicate.\n{titles}\n")


def author_messages(slot: int, count: int, domain: str = DEFAULT_DOMAIN,
                    seeds: list[int] | tuple[int, ...] = DEFAULT_SEEDS, family: str = "",
                    earlier: Sequence[str] = ()) -> Prompt:
    """The authoring request: the brief as text, and the same request as data (``AuthorRequest``).

    ``family``: this slot's domain family (``core/authoring/plan.py``); ``earlier``: titles of the author's
    valid environments from earlier waves, which this slot must not repeat."""
    brief = domain if not family else family if domain == DEFAULT_DOMAIN else f"{domain} (family for this slot: {family})"
    titles = "\n".join(f"- {title}" for title in earlier)
    user = AUTHOR_BRIEF.format(domain=brief, slot=slot, count=count, seeds=list(seeds),
                               allowed=ALLOWED_MODULES_SENTENCE, earlier=EARLIER_DESIGNS.format(titles=titles) if earlier else "")
    return Prompt([{"role": "system", "content": AUTHOR_SYSTEM_PROMPT}, {"role": "user", "content": user}],
                  AuthorRequest(slot=slot, count=count, domain=domain, seeds=tuple(seeds), family=family,
                                earlier=tuple(earlier)))


def author_messages_v1(request: AuthorRequest) -> list[dict[str, str]]:
    """The version-1 messages for ``request`` (its slot, count, domain and seeds; family and earlier designs
    did not exist): what the simulated authors seed their draws from."""
    user = AUTHOR_BRIEF_V1.format(domain=request.domain, slot=request.slot, count=request.count,
                                  seeds=list(request.seeds), allowed=ALLOWED_MODULES_SENTENCE)
    return [{"role": "system", "content": AUTHOR_SYSTEM_PROMPT}, {"role": "user", "content": user}]


def make_env_id(author: str, round_: int, slot: int, source: str) -> str:
    return f"{author}.r{round_}.{slot}.{sha256_text(source)[:8]}"


def spec_from_reply(author: str, slot: int, reply: str, seeds: list[int], round_: int = 0,
                    prompt_version: str | None = None) -> EnvironmentSpec:
    """A spec ready for validation, or an already-rejected spec carrying the parse failure.
    ``prompt_version``: the prompt the reply answers (stored per environment)."""
    try:
        parsed = parse_author_reply(reply)
    except AuthorReplyError as exc:
        return EnvironmentSpec(env_id=make_env_id(author, round_, slot, reply), author=author, class_name="Unparsed",
                               max_turns=1, source=reply, hint="", benchmark_seeds=seeds, valid=False,
                               reject_reason=f"unparsable author reply: {exc}", round=round_,
                               prompt_version=prompt_version)
    return EnvironmentSpec(env_id=make_env_id(author, round_, slot, parsed.source), author=author,
                           domain=parsed.domain, class_name=parsed.class_name, max_turns=parsed.max_turns,
                           source=parsed.source, hint=parsed.hint, benchmark_seeds=seeds, family=parsed.family,
                           round=round_, author_meta=parsed.meta or {}, prompt_version=prompt_version)


def simulated_author(gateway: ChatGateway, author: str) -> bool:
    """True for a simulated author, in process or behind ``envduels serve-sim`` (``request_contract``).

    They are exempt from the duplicate check: every simulated author renders the same few family templates
    by design (sim/profiles.py), so its slots K and K+4 are the same game at another difficulty, and its
    documented results (validity, rankings, controls) count them as distinct environments."""
    registry = getattr(gateway, "registry", None)
    entry = registry.get(author) if registry is not None else None
    return bool(entry is not None and (entry.is_simulated or entry.request_contract))


async def author_environments(gateway: ChatGateway, author: str, count: int, seeds: list[int], limits=None,
                              on_progress=None, plan: AuthoringPlan | None = None) -> list[EnvironmentSpec]:
    """Have ``author`` write ``count`` round-0 environments and validate each in the sandbox (later rounds are
    hardened from these: ``hardening.harden_author``).

    Slots go in waves (``plan``, ``core/authoring/plan.py``): each slot has its own domain family, and the
    slots of a later wave see the titles of the valid environments of the earlier ones. The calls of a wave
    run together; their replies are checked in slot order. A reply whose code copies an earlier valid
    environment of this batch is rejected as ``duplicate of <env_id>`` before it is validated (simulated
    authors excepted, see :func:`simulated_author`).

    An LLMError from the gateway propagates: an infrastructure failure must not be
    recorded as an author's invalid environment.
    """
    from envduels_dagster.core.authoring.validation import validate_environment
    from envduels_dagster.core.models.costing import usage_fields

    plan = plan if plan is not None else AuthoringPlan()
    threshold = None if simulated_author(gateway, author) else plan.duplicate_threshold
    specs: list[EnvironmentSpec] = []
    for wave in plan.waves(count):
        titles = [design_title(s.class_name, s.domain) for s in specs if s.valid]
        prompts = [author_messages(slot, count, plan.domain, seeds, plan.family(slot), titles) for slot in wave]
        replies = await gather_or_cancel(gateway.chat(author, prompt, seed=slot) for slot, prompt in zip(wave, prompts))
        for slot, reply in zip(wave, replies):
            spec = spec_from_reply(author, slot, reply.text, seeds, 0, PROMPT_VERSION).model_copy(
                update=usage_fields(gateway, author, reply))
            if spec.reject_reason is None and threshold is not None:
                copied = find_duplicate(spec.source, {s.env_id: s.source for s in specs if s.valid}, threshold)
                if copied is not None:
                    spec = spec.model_copy(update={"valid": False, "reject_reason": duplicate_reason(*copied)})
            if spec.reject_reason is None:
                spec = await validate_environment(spec, limits)
            specs.append(spec)
            if on_progress is not None:
                on_progress(slot + 1, count, spec)
    return specs
