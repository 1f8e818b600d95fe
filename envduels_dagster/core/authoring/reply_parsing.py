"""Read an author's reply the way models actually write it.

Why a parser of its own: the reply is free text from a model, and models of
different families answer the same brief in different shapes. Reasoning models
draft a class inside ``<think>...</think>`` before the final answer (parsing
the draft would silently register the wrong environment); some fence code with
``~~~`` or four backticks; some give metadata as YAML, or JSON with a trailing
comma, or an inline object whose hint itself contains ``\\boxed{...}``. Every
reply either parses into one ``ParsedReply`` or raises ``AuthorReplyError``
whose message says what was missing or wrong, so the author's rejection is
recorded with a reason (never an exception that kills the batch).

Rules, in order (docs/INPUTS.md repeats them for users):
1. Reasoning sections are removed: ``<think>``, ``<thinking>``, ``<reasoning>``,
   ``<reflection>``, ``<scratchpad>`` (any case), closed or not; a lone closing
   tag drops everything before it (templates that open the section themselves).
2. Fenced blocks: 3+ backticks or tildes, any info string; a block closes with
   the same character at least as long. Unclosed blocks are not candidates.
3. Metadata: the last fenced JSON / JSON5 / YAML mapping, else the last inline
   JSON object in the prose that carries a known key. Strict JSON first, then
   JSON5, then YAML, then json-repair (the repair is noted in later errors).
4. Code: the last complete block that defines the named class (metadata's
   ``class_name``), else the last one defining an environment class (one with
   ``reset`` and ``step``), else the last block labelled Python.

Pure: no Dagster, no sandbox. ``import json_repair``/``json5``/``yaml`` happen
inside the functions that need them.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass


class AuthorReplyError(ValueError):
    pass


@dataclass
class ParsedReply:
    source: str
    class_name: str
    domain: str
    hint: str
    max_turns: int
    family: str | None = None
    meta: dict | None = None


DEFAULT_MAX_TURNS = 10
MAX_TURNS_RANGE = (1, 200)
REASONING_TAGS = ("think", "thinking", "reasoning", "reflection", "scratchpad", "thought")
PYTHON_LANGS = {"python", "py", "python3", "py3", "pycon"}
JSON_LANGS = {"json", "json5", "jsonc"}
YAML_LANGS = {"yaml", "yml"}
# Keys authors use for the same field (all compared case-insensitively, '-' and ' ' read as '_').
ALIASES = {"class_name": ("class_name", "classname", "class", "env_class", "environment_class"),
           "hint": ("hint", "privileged_hint", "hints"),
           "max_turns": ("max_turns", "maxturns", "turns", "turn_limit"),
           "domain": ("domain", "category"),
           "family": ("family",)}
KNOWN_KEYS = {a for names in ALIASES.values() for a in names}

_TAGS = "|".join(REASONING_TAGS)
_CLOSED = re.compile(rf"<({_TAGS})(?:\s[^>]*)?>.*?</\1\s*>", re.S | re.I)
_OPEN = re.compile(rf"<({_TAGS})(?:\s[^>]*)?>", re.I)
_CLOSE = re.compile(rf"</({_TAGS})\s*>", re.I)
# An opening fence: 3+ backticks or tildes, an optional info string (first word = language), newline.
_FENCE_OPEN = re.compile(r"(`{3,}|~{3,})[ \t]*([^\s`~]*)[^\n`]*\n")
_FENCE_LINE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([^\s`~]*)[^\n`]*\n", re.M)


@dataclass
class Block:
    lang: str  # lower-cased first word of the info string ("" when none)
    body: str
    closed: bool
    start: int  # offsets in the (reasoning-free) text, for telling prose from blocks
    end: int


def strip_reasoning(text: str) -> tuple[str, str | None]:
    """(answer text, name of an unclosed reasoning tag or None)."""
    text = _CLOSED.sub("", text)
    close = None
    for close in _CLOSE.finditer(text):  # noqa: B007 -- the loop keeps the last closing tag
        pass
    if close is not None:  # a closing tag whose opening the chat template wrote: the answer follows it
        text = text[close.end():]
    m = _OPEN.search(text)
    if m is not None:
        return text[:m.start()], m.group(1).lower()
    return text, None


def fenced_blocks(text: str) -> list[Block]:
    """Fenced blocks in order (see the rules above).

    A fence closes on a run of its character at least as long that starts or ends a line: the
    body then ends right before the run, verbatim (a source without a final newline followed by
    the fence, as the simulated authors' truncated sources read). A closing run glued to the next
    opening fence (three backticks then three more and ``json``) closes one block and opens the
    next, as the first version of this parser read it.
    """
    blocks: list[Block] = []
    pos, glued = 0, False
    while True:
        m = _FENCE_OPEN.match(text, pos) if glued else None
        if m is None:
            m = _FENCE_LINE.search(text, pos)
        if m is None:
            return blocks
        fence, lang = m.group(1), m.group(2).lower().strip("{}.")
        body_start = m.end()
        close = None
        for run in re.finditer(re.escape(fence[0]) + f"{{{len(fence)},}}", text[body_start:]):
            a, b = body_start + run.start(), body_start + run.end()
            line_start = text.rfind("\n", 0, a) + 1
            line_end = text.find("\n", b)
            line_end = len(text) if line_end == -1 else line_end
            if not text[b:line_end].strip():
                close, pos, glued = a, min(line_end + 1, len(text)), False
                break
            if not text[line_start:a].strip():
                close, pos, glued = a, a + len(fence), True
                break
        if close is None:
            blocks.append(Block(lang, text[body_start:], False, m.start(), len(text)))
            return blocks
        blocks.append(Block(lang, text[body_start:close], True, m.start(), pos))


def _norm(key: object) -> str:
    return re.sub(r"[\s\-]+", "_", str(key).strip().lower())


def _field(meta: dict, name: str):
    by_norm = {_norm(k): v for k, v in meta.items()}
    for alias in ALIASES[name]:
        if alias in by_norm:
            return by_norm[alias]
    return None


def _has_known_key(meta: object) -> bool:
    return isinstance(meta, dict) and any(_norm(k) in KNOWN_KEYS for k in meta)


def parse_mapping(raw: str, lang: str = "") -> tuple[object, str | None]:
    """(value, note): strict JSON, JSON5, YAML, then json-repair. ``note`` says when repair was needed.

    Raises AuthorReplyError when nothing reads it as a mapping or list."""
    try:
        return json.loads(raw), None
    except ValueError as exc:
        strict_error = f"{exc.msg} at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else str(exc)
    import json5
    import yaml

    try:
        return json5.loads(raw), None
    except (ValueError, RecursionError):
        pass
    if lang in YAML_LANGS or not raw.lstrip().startswith(("{", "[")):
        try:
            value = yaml.safe_load(raw)
            if isinstance(value, (dict, list)):
                return value, None
        except (yaml.YAMLError, RecursionError):
            pass
        if lang in YAML_LANGS:
            raise AuthorReplyError("metadata block is not valid YAML (and not JSON: "
                                   f"{strict_error})") from None
    import json_repair

    try:
        value = json_repair.loads(raw)
    except (ValueError, RecursionError):  # json-repair gives up on some inputs
        value = None
    if isinstance(value, (dict, list)) and value:
        return value, f"repaired from invalid JSON: {strict_error}"
    raise AuthorReplyError(f"metadata block is not valid JSON: {strict_error}")


def _inline_objects(text: str, blocks: list[Block]):
    """JSON-ish objects in the prose (outside fenced blocks), last first. Braces inside strings
    (a hint that mentions ``\\boxed{...}``) are skipped while balancing."""
    chars = list(text)
    for b in blocks:
        chars[b.start:b.end] = " " * (b.end - b.start)
    prose = "".join(chars)
    found = []
    for start in [m.start() for m in re.finditer(r"\{", prose)]:
        end = _balanced_end(prose, start)
        if end is not None:
            found.append(prose[start:end])
    return list(reversed(found))


def _balanced_end(s: str, start: int) -> int | None:
    depth, quote, i = 0, None, start
    while i < len(s):
        ch = s[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'" and (depth > 0) and _opens_string(s, i):
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _opens_string(s: str, i: int) -> bool:
    """A quote opens a string when it follows a JSON delimiter (an apostrophe in prose does not)."""
    j = i - 1
    while j >= 0 and s[j] in " \t\r\n":
        j -= 1
    return j < 0 or s[j] in "{[,:"


def find_metadata(text: str, blocks: list[Block]) -> tuple[dict, str | None]:
    """(metadata, note) from the last metadata block, else the last inline object; ({}, None) when none."""
    labelled = [b for b in blocks if b.closed and b.lang in JSON_LANGS | YAML_LANGS]
    unlabelled = [b for b in blocks if b.closed and b.lang not in JSON_LANGS | YAML_LANGS | PYTHON_LANGS
                  and _looks_like_metadata(b.body)]
    errors: list[AuthorReplyError] = []
    for block in reversed(labelled or unlabelled):
        try:
            value, note = parse_mapping(block.body, block.lang)
        except AuthorReplyError as exc:
            errors.append(exc)
            continue
        if not isinstance(value, dict):
            errors.append(AuthorReplyError(f"metadata block must be a JSON object (got a {type(value).__name__})"
                                           if block.lang not in YAML_LANGS else
                                           f"metadata block must be a YAML mapping (got a {type(value).__name__})"))
            continue
        return value, note
    for raw in _inline_objects(text, blocks):
        try:
            value, note = parse_mapping(raw, "json")
        except AuthorReplyError:
            continue
        if isinstance(value, dict) and _has_known_key(value):
            return value, note
    if errors:
        raise errors[0]
    return {}, None


def _looks_like_metadata(body: str) -> bool:
    head = body.lstrip()
    if head.startswith(("{", "[")):
        return True
    return bool(re.match(r"^[\"']?(class[_ ]?name|hint|max[_ ]?turns|domain)[\"']?\s*:", head, re.I))


def classes_in(code: str) -> tuple[list[str], list[str]] | None:
    """(all top-level class names, those defining reset and step), or None if the code does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    envs = [n.name for n in classes if {"reset", "step"} <= {f.name for f in n.body
                                                               if isinstance(f, (ast.FunctionDef,
                                                                                 ast.AsyncFunctionDef))}]
    return [n.name for n in classes], envs


def _defines(code: str, name: str) -> bool:
    return re.search(rf"^[ \t]*class[ \t]+{re.escape(name)}\b", code, re.M) is not None


def choose_code(blocks: list[Block], class_name: str | None) -> Block | None:
    complete = [b for b in blocks if b.closed]
    python = [b for b in complete if b.lang in PYTHON_LANGS]
    other = [b for b in complete if b.lang not in PYTHON_LANGS | JSON_LANGS | YAML_LANGS]
    if class_name:
        for group in (python, other):
            for block in reversed(group):
                if _defines(block.body, class_name):
                    return block
    for group in (python, other):
        for block in reversed(group):
            info = classes_in(block.body)
            if info is not None and info[1]:
                return block
    if python:
        return python[-1]
    return next((b for b in reversed(other) if "class " in b.body and "def " in b.body), None)


def _infer_class(code: str) -> str:
    """The one class in the source that defines both reset and step."""
    info = classes_in(code)
    if info is None:
        m = re.search(r"^class\s+([A-Za-z_]\w*)", code, re.M)
        if m:
            return m.group(1)
        raise AuthorReplyError("metadata gives no class_name and the code defines no class") from None
    found = info[1]
    if len(found) != 1:
        raise AuthorReplyError(f"metadata gives no class_name and the code defines {len(found)} environment classes"
                               + (f" ({', '.join(found)}); name one in the metadata field 'class_name'"
                                  if found else ""))
    return found[0]


def _hint_text(value) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    if isinstance(value, dict) and value and all(isinstance(v, str) for v in value.values()):
        return "\n".join(str(value[k]) for k in sorted(value, key=str))  # graded hints hint_1, hint_2, ...
    return None


def _max_turns(meta: dict, note: str) -> int:
    raw = _field(meta, "max_turns")
    if raw is None:
        return DEFAULT_MAX_TURNS
    if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
        raise AuthorReplyError(f"max_turns {raw!r} is not an integer{note}")
    try:
        value = int(raw)
    except (TypeError, ValueError, OverflowError):
        raise AuthorReplyError(f"max_turns {raw!r} is not an integer{note}") from None
    low, high = MAX_TURNS_RANGE
    if not low <= value <= high:
        raise AuthorReplyError(f"max_turns {value} is outside {low}..{high}{note}")
    return value


def parse_author_reply(text: str) -> ParsedReply:
    """Extract source and metadata from a free-form author reply; raise AuthorReplyError with the reason."""
    if not isinstance(text, str):
        raise AuthorReplyError(f"reply is a {type(text).__name__}, not text")
    answer, unclosed = strip_reasoning(text)
    blocks = fenced_blocks(answer)
    meta, repaired = find_metadata(answer, blocks)
    meta = json.loads(json.dumps(meta, default=str))  # YAML dates and the like: stored as JSON later
    note = f" (metadata {repaired})" if repaired else ""
    named = _field(meta, "class_name")
    named = named.strip() if isinstance(named, str) and named.strip() else None
    block = choose_code(blocks, named)
    if block is None:
        if unclosed:
            raise AuthorReplyError(f"reply contains no ```python code block after its reasoning: the <{unclosed}> "
                                   "section is never closed (was the reply cut off?)")
        if any(not b.closed for b in blocks):
            raise AuthorReplyError("reply contains no ```python code block: its last code fence is never closed "
                                   "(was the reply cut off?)")
        raise AuthorReplyError("reply contains no ```python code block")
    code = block.body
    class_name = named or _infer_class(code)
    hint = _hint_text(_field(meta, "hint"))
    if hint is None or not hint.strip():
        where = "" if meta else ": the reply has no ```json or ```yaml metadata block"
        raise AuthorReplyError(f"reply gives no hint (metadata field 'hint' is missing or empty){where}{note}")
    max_turns = _max_turns(meta, note)
    domain, family = _field(meta, "domain"), _field(meta, "family")
    return ParsedReply(source=code, class_name=str(class_name), domain=str(domain or "unknown"), hint=hint.strip(),
                       max_turns=max_turns, family=None if family is None else str(family), meta=meta)
