"""Find secret-looking strings in text (transcripts, errors, registry rows) and describe them redacted.

Why redacted: a finding goes into check metadata shown in the Dagster UI, so it must
identify the leak (kind, where, first characters, length) without repeating the secret.
Patterns: provider key shapes (OpenAI/Anthropic ``sk-``, AWS ``AKIA``/``ASIA``, GitHub,
Slack, Google, Hugging Face), private-key blocks, credentials in URLs, long tokens
right after words like key/token/secret/password/bearer, and the literal *value* of any
environment variable the registry names in ``api_key_env`` (when it is set here).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

# (kind, pattern, literal triggers): a pattern runs only when one of its triggers occurs in the text
# (case-insensitively for the keyword pattern), which keeps a scan of long transcripts cheap.
PATTERNS: list[tuple[str, re.Pattern[str], tuple[str, ...]]] = [
    ("sk- API key", re.compile(r"\bsk-(?:[A-Za-z]+-)?[A-Za-z0-9_\-]{16,}"), ("sk-",)),
    ("AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), ("AKIA", "ASIA")),
    ("GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
     ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    ("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"), ("xox",)),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"), ("AIza",)),
    ("Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}"), ("hf_",)),
    ("private key block", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), ("PRIVATE KEY",)),
    ("credentials in URL", re.compile(r"\b[a-z][a-z0-9+.\-]*://[^\s/:@\"'\\]+:[^\s/@\"'\\]+@"), ("://",)),
    # A long token (hex, base64 or url-safe, with at least one digit) right after key/token/secret/...
    ("token after key/token word", re.compile(
        r"(?i)(?:api[_\- ]?key|access[_\- ]?key|secret|token|password|passwd|bearer|authorization)"
        r"[\s\"'\\:=]{1,8}(?=[A-Za-z0-9+/_.\-]*\d)([A-Za-z0-9+/_.\-]{20,}={0,2})"),
     ("key", "secret", "token", "passw", "bearer", "authorization")),
]
_CASELESS = {"token after key/token word"}


def redact(value: str) -> str:
    return f"{value[:4]}…({len(value)} chars)"


def env_secret_values(names: Iterable[str | None]) -> dict[str, str]:
    """The values of the named environment variables that are set (and long enough to be keys)."""
    out: dict[str, str] = {}
    for name in names:
        if name and isinstance(name, str):
            value = os.environ.get(name)
            if value and len(value) >= 8:
                out[name] = value
    return out


def find_secret(text: object, env_values: dict[str, str] | None = None) -> str | None:
    """A redacted description of the first secret-looking string in ``text``, or None."""
    if not isinstance(text, str) or not text:
        return None
    for name, value in (env_values or {}).items():
        if value in text:
            return f"value of ${name} ({len(value)} chars)"
    lowered = None
    for kind, pattern, triggers in PATTERNS:
        if kind in _CASELESS:
            lowered = text.lower() if lowered is None else lowered
            haystack = lowered
        else:
            haystack = text
        if not any(t in haystack for t in triggers):
            continue
        m = pattern.search(text)
        if m:
            token = m.group(m.lastindex or 0)
            return f"{kind}: {redact(token)}"
    return None


def find_secret_in(texts: Iterable[object], env_values: dict[str, str] | None = None) -> str | None:
    for text in texts:
        hit = find_secret(text, env_values)
        if hit:
            return hit
    return None
