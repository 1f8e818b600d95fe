"""Co-evolution rounds: authors see how others played their environments and harden them.

Why a digest and not raw transcripts: authors learn from where solvers failed,
but the digest is bounded (``transcript_budget`` characters of excerpts) and
scrubbed of every other author's hint, so no author learns another's secrets.
Round r+1 environments link to their round-r parent and go through the same
validation as any other environment.
"""

from __future__ import annotations

import json
import math
import re

import pandas as pd

from envduels_dagster.core.authoring.prompts import AUTHOR_SYSTEM_PROMPT, make_env_id, spec_from_reply
from envduels_dagster.core.models.contract import HardenRequest, PeerRates, Prompt
from envduels_dagster.core.protocol import EnvironmentSpec
from envduels_dagster.core.stats.discrimination import discrimination

HARDEN_PROMPT_VERSION = "harden-v1"  # stored with each rewritten environment (EnvironmentSpec.prompt_version)
HARDEN_BRIEF = """Round {round}: harden your environment {env_id} using how other models played it.

Your previous environment:
```python
{source}
```
Its metadata:
```json
{meta}
```
{verdict}
How the other models played it on seeds {seeds} (success rates):
{table}

Where they failed (excerpts, {budget} characters at most):
{excerpts}

Goal: a capable player should FAIL cold but PASS with your hint. Write an improved version in the
same reply format (a ```python block and a ```json metadata block), or keep it unchanged by replying
with only ```json {{"keep": true, "reason": "..."}}```.
Environment slot: {slot}
"""

REDACTED = "[another author's hint removed]"


def scrub(text: str, forbidden: list[str]) -> str:
    for hint in sorted((h for h in forbidden if h), key=len, reverse=True):
        text = text.replace(hint, REDACTED)
    return text


def failure_excerpts(episodes: pd.DataFrame, budget: int, forbidden_hints: list[str]) -> str:
    """The last turns of failed peer episodes, most informative first, within ``budget`` characters."""
    lines: list[str] = []
    used = 0
    failed = episodes[episodes["status"] == "failure"].sort_values(["condition", "solver", "seed"])
    for row in failed.itertuples(index=False):
        turns = json.loads(row.transcript)
        tail = [m for m in turns if m["role"] in ("user", "assistant")][-2:]  # not the viewer's trailer
        body = " | ".join(f"{m['role']}: {m['content'][:160]}" for m in tail)
        line = scrub(f"- {row.solver} ({row.condition}, seed {row.seed}): {body}", forbidden_hints)
        if used + len(line) + 1 > budget:
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines) or "- (no failures)"


def build_digest_messages(parent: EnvironmentSpec, peer_episodes: pd.DataFrame, round_: int, slot: int,
                          budget: int, forbidden_hints: list[str]) -> Prompt:
    """The hardening request for one parent environment, as text and as data (``HardenRequest``).
    ``peer_episodes``: other solvers only."""
    done = peer_episodes[peer_episodes["status"] != "incomplete"]
    peer_rates: list[PeerRates] = []
    if done.empty:
        table = "- (nobody played it)"
    else:
        rates = (done.assign(y=(done["status"] == "success").astype(float))
                 .pivot_table(index="solver", columns="condition", values="y", aggfunc="mean")
                 .reindex(columns=["cold", "hinted"]))
        table = "\n".join(f"- {solver}: cold {r.cold:.2f}, hinted {r.hinted:.2f}" for solver, r in rates.iterrows())
        peer_rates = [PeerRates(solver=str(solver), cold=float(r.cold), hinted=float(r.hinted))
                      for solver, r in rates.iterrows() if not (math.isnan(r.cold) or math.isnan(r.hinted))]
    verdict = "" if parent.valid else f"It was REJECTED by validation: {parent.reject_reason}\n"
    meta = {**parent.author_meta, "hint": parent.hint, "max_turns": parent.max_turns,
            "class_name": parent.class_name, "domain": parent.domain}
    meta_json = json.dumps(meta, indent=2)
    user = HARDEN_BRIEF.format(
        round=round_, env_id=parent.env_id, source=parent.source, meta=meta_json, verdict=verdict,
        seeds=parent.benchmark_seeds, table=table, budget=budget,
        excerpts=failure_excerpts(peer_episodes, budget, forbidden_hints), slot=slot)
    # The request says what the brief says, scrubbed the same way: no author learns another's hint
    # from the data either (and an own hint equal to another author's reads as removed, as in the text).
    request = HardenRequest(slot=slot, round=round_, parent_env_id=parent.env_id,
                            parent_meta=_scrubbed_meta(meta, meta_json, forbidden_hints), parent_valid=parent.valid,
                            reject_reason=scrub(parent.reject_reason, forbidden_hints) if parent.reject_reason else None,
                            seeds=tuple(parent.benchmark_seeds), peer_rates=tuple(peer_rates))
    return Prompt([{"role": "system", "content": AUTHOR_SYSTEM_PROMPT},
                   {"role": "user", "content": scrub(user, forbidden_hints)}], request)


def _scrubbed_meta(meta: dict, meta_json: str, forbidden_hints: list[str]) -> dict:
    """The metadata as the scrubbed brief shows it (a hint that spans JSON syntax: scrub value by value)."""
    try:
        shown = json.loads(scrub(meta_json, forbidden_hints))
    except json.JSONDecodeError:
        shown = None
    if not isinstance(shown, dict):
        shown = {k: scrub(v, forbidden_hints) if isinstance(v, str) else v for k, v in json.loads(meta_json).items()}
    return shown


def child_from_reply(parent: EnvironmentSpec, reply: str, round_: int, slot: int) -> tuple[EnvironmentSpec, bool]:
    """(child spec, needs_validation). A "keep" reply copies the parent under a new id, linked to it."""
    keep = re.search(r"```json\s*(\{.*?\})\s*```", reply, re.S)
    if keep and "```python" not in reply:
        try:
            data = json.loads(keep.group(1))
        except json.JSONDecodeError:
            data = {}
        if data.get("keep"):
            child = parent.model_copy(update={
                "env_id": make_env_id(parent.author, round_, slot, parent.source), "round": round_,
                "parent_env_id": parent.env_id,
                "author_meta": {**parent.author_meta, "keep": True, "keep_reason": str(data.get("reason", ""))}})
            return child, False
    child = spec_from_reply(parent.author, slot, reply, list(parent.benchmark_seeds), round_, HARDEN_PROMPT_VERSION)
    return child.model_copy(update={"parent_env_id": parent.env_id}), child.reject_reason is None


def env_scores(episodes: pd.DataFrame) -> pd.DataFrame:
    """Per environment: design score (peer discrimination of cold success) and hint score (mean peer lift)."""
    peers = episodes[(episodes["status"] != "incomplete") & (episodes["author"] != episodes["solver"])]
    if peers.empty:
        return pd.DataFrame(columns=["env_id", "author", "design", "hint"])
    y = peers.assign(y=(peers["status"] == "success").astype(float))
    per = y.pivot_table(index=["env_id", "author", "solver"], columns="condition", values="y", aggfunc="mean")
    per = per.reindex(columns=["cold", "hinted"]).dropna().reset_index()
    rows = []
    for (env_id, author), grp in per.groupby(["env_id", "author"]):
        rows.append({"env_id": env_id, "author": author, "design": discrimination(list(grp["cold"])),
                     "hint": float((grp["hinted"] - grp["cold"]).mean())})
    return pd.DataFrame(rows)
