"""Near-duplicate environments within one author's batch (issue 31).

Why the AST shape: it is the similarity the convergence study already computes (``core/rankings/convergence.py``):
two environments built on the same design share the shape of their syntax tree even when names, constants
and wording differ, so a copy with the class renamed and the messages reworded is still a copy. Measured on
the real-model corpus (19 environments of distinct designs): the most similar pair scores 0.73; a copy
with its class, a constant and the messages renamed scores 1.0. The default threshold, 0.9, is the
convergence study's own cluster threshold.

Compared pair by pair (the tf-idf weights of two sources), so a verdict does not depend on which other
environments happen to be in the batch.
"""

from __future__ import annotations

from collections.abc import Mapping

from envduels_dagster.core.stats.similarity import similarity_matrix


def source_similarity(a: str, b: str) -> float:
    """AST-shape similarity of two sources, 0..1 (0 when either does not parse)."""
    return float(similarity_matrix([a, b])[0, 1])


def find_duplicate(source: str, earlier: Mapping[str, str], threshold: float) -> tuple[str, float] | None:
    """The earlier environment ``source`` copies (``(env_id, similarity)``, the most similar one), or None.

    ``earlier`` maps env_id -> source, in the order they were written; a tie goes to the earliest."""
    best: tuple[str, float] | None = None
    for env_id, other in earlier.items():
        score = 1.0 if other == source else source_similarity(source, other)
        if score >= threshold and (best is None or score > best[1]):
            best = (env_id, score)
    return best


def duplicate_reason(env_id: str, score: float) -> str:
    """The reject reason; it starts with ``duplicate of <env_id>`` (what readers match on)."""
    return f"duplicate of {env_id} (AST similarity {score:.2f})"


def is_duplicate(reject_reason: str | None) -> bool:
    return bool(reject_reason) and str(reject_reason).startswith("duplicate of ")
