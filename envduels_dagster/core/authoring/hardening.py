"""One co-evolution round for one author: read what peers did, ask for hardened children, validate them.

Why here: the loop (one digest per parent, one call per slot with a round- and slot-derived
seed, validation only for rewritten children, lineage through ``parent_env_id``) is the
round's protocol; keeping it out of the Dagster layer lets tests drive it with any gateway.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from envduels_dagster.core.authoring.coevolution import build_digest_messages, child_from_reply
from envduels_dagster.core.authoring.validation import validate_environment
from envduels_dagster.core.models.costing import usage_fields
from envduels_dagster.core.protocol import EnvironmentSpec


@dataclass
class HardeningInputs:
    parents: list[EnvironmentSpec]  # the author's round r-1 environments
    episodes: pd.DataFrame  # every episode played on them in round r-1
    other_hints: list[str]  # hints by other authors: scrubbed from the failure excerpts


def read_hardening_inputs(conn, author: str, round_: int) -> HardeningInputs:
    """What round ``round_`` of ``author`` reads from the warehouse (``conn``: a DuckDB connection).

    The same warehouse gives the same inputs whatever order rows were written in or other runs ran in: parents
    in slot order (a child's slot and seed follow its parent's position), and only hints of rounds before
    ``round_``, sorted (the round-``round_ - 1`` transcripts can hold no later hint, and whether another author's
    round ``round_`` was already written depends on which run went first)."""
    from envduels_dagster.core.storage.warehouse import read_table, specs_from_rows

    parents = sorted(specs_from_rows(read_table(conn, "environments", {"author": author, "round": round_ - 1})),
                     key=_slot_key)
    episodes = read_table(conn, "episodes", {"author": author, "round": round_ - 1})
    hints = conn.execute("SELECT DISTINCT hint FROM environments WHERE author <> ? AND hint <> '' AND round < ? "
                         "ORDER BY hint", [author, round_]).fetchall()
    return HardeningInputs(parents, episodes, [h for (h,) in hints])


def _slot_key(spec: EnvironmentSpec) -> tuple[int, str]:
    """``author.r{round}.{slot}.{digest}`` (core/authoring/prompts.make_env_id) by slot; any other id after, by id."""
    parts = spec.env_id.rsplit(".", 2)
    return (int(parts[1]), spec.env_id) if len(parts) == 3 and parts[1].isdigit() else (1 << 30, spec.env_id)


async def harden_author(gw, author: str, round_: int, inputs: HardeningInputs, budget: int,
                        limits) -> list[EnvironmentSpec]:
    """Round ``round_`` children of ``inputs.parents``: each one hardened (and validated) or kept, in slot order.
    Each parent's digest shows its episodes among ``inputs.episodes`` played by others, within ``budget``
    characters, with ``inputs.other_hints`` scrubbed from it.

    Every slot's call is made at once (one call's wall time, not the sum: a real hardening call takes
    minutes), within the provider's ``max_in_flight`` and rate limits (the gateway enforces them); the first
    failure cancels the others (``gather_or_cancel``). The replies are then read and validated in slot order."""
    from envduels_dagster.core.concurrency.gather import gather_or_cancel

    parents, peer_episodes, other_hints = inputs.parents, inputs.episodes, inputs.other_hints
    digests = []
    for slot, parent in enumerate(parents):
        peers = peer_episodes[(peer_episodes["env_id"] == parent.env_id) & (peer_episodes["solver"] != author)]
        digests.append(build_digest_messages(parent, peers, round_, slot, budget, other_hints))
    replies = await gather_or_cancel(gw.chat(author, messages, seed=1000 * round_ + slot)
                                     for slot, messages in enumerate(digests))
    children = []
    for slot, (parent, reply) in enumerate(zip(parents, replies)):
        child, needs_validation = child_from_reply(parent, reply.text, round_, slot)
        child = child.model_copy(update=usage_fields(gw, author, reply))  # this call's usage, not the parent's
        if needs_validation:
            child = (await validate_environment(child, limits)).model_copy(update={"parent_env_id": parent.env_id})
        children.append(child)
    return children


def kept_count(children: list[EnvironmentSpec]) -> int:
    return sum(bool(c.author_meta.get("keep")) for c in children)
