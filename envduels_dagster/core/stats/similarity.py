"""How alike two environments' designs are: cosine similarity of their AST-shape n-grams (tf-idf).

Why here, in stats: the design-convergence study (``core/rankings/convergence.py``) and the near-duplicate check
of authoring (``core/authoring/duplicates.py``) measure similarity the same way; authoring sits below the rankings
in the layers (docs/ARCHITECTURE.md), so the measure lives below both. Two environments built on the same
design share the shape of their syntax tree even when names, constants and wording differ, so we compare
the sequences of AST node types, not the text. Pure Python/numpy.
"""

from __future__ import annotations

import ast
from collections import Counter

import numpy as np

NGRAM = 4


def shape_tokens(source: str) -> list[str]:
    """Pre-order sequence of AST node type names (empty when the source does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # the parser's own nesting limit
        return []
    # Iterative pre-order (same order as the recursive walk): a valid source with a 1,500-term
    # expression nests 1,500 deep, past Python's recursion limit, and made this raise RecursionError.
    out: list[str] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        out.append(type(node).__name__)
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return out


def shape_ngrams(source: str, n: int = NGRAM) -> Counter:
    tokens = shape_tokens(source)
    return Counter(tuple(tokens[i:i + n]) for i in range(max(len(tokens) - n + 1, 0)))


def similarity_matrix(sources: list[str], n: int = NGRAM) -> np.ndarray:
    """Cosine similarity of AST-shape n-gram tf-idf vectors, (E, E), 1 on the diagonal (0 if unparsable)."""
    bags = [shape_ngrams(s, n) for s in sources]
    vocab = {g: i for i, g in enumerate(sorted({g for b in bags for g in b}))}
    x = np.zeros((len(bags), max(len(vocab), 1)))
    for row, bag in enumerate(bags):
        for gram, count in bag.items():
            x[row, vocab[gram]] = count
    # Sublinear term frequency and smoothed inverse document frequency: boilerplate every environment
    # shares (class and method scaffolding) weighs less than the n-grams that tell designs apart.
    present = x > 0
    x[present] = 1.0 + np.log(x[present])
    x *= np.log((1.0 + len(bags)) / (1.0 + present.sum(axis=0)))[None, :] + 1.0
    norms = np.linalg.norm(x, axis=1)
    x = x / np.where(norms > 0, norms, 1)[:, None]
    sim = x @ x.T
    np.fill_diagonal(sim, np.where(norms > 0, 1.0, 0.0))
    return np.clip(sim, 0.0, 1.0)
