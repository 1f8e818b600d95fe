"""design_convergence on valid but deeply nested sources (a 1,500-term expression used to raise RecursionError)."""

from __future__ import annotations

import ast
import sys

import pandas as pd

from envduels_dagster.core.rankings import convergence as conv
from tests.helpers.environments import CODE

LONG = CODE.replace("won = self.side in action", "won = self.side in action\n        bonus = "
                    + " + ".join(["1"] * 1500))


def recursive_shape(source: str) -> list[str]:
    """The walk as it was written before (recursive pre-order): the iterative one must equal it."""
    out = []

    def visit(node):
        out.append(type(node).__name__)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return out


def test_a_1500_term_expression_compiles_and_design_convergence_reads_it():
    compile(LONG, "long.py", "exec")  # a valid environment, as the sandbox would load it
    limit = sys.getrecursionlimit()
    tokens = conv.shape_tokens(LONG)
    assert sys.getrecursionlimit() == limit
    assert tokens.count("BinOp") == 1499 and tokens.count("Constant") >= 1500
    envs = pd.DataFrame({"env_id": ["a.0", "b.0", "b.1"], "author": ["a", "b", "b"],
                         "source": [LONG, CODE, LONG.replace("Coin", "Coin2")]})
    table, clusters = conv.design_convergence(envs, n_perm=20)
    assert set(table["scope"]) == {"overall", "within", "pair"}
    sim = conv.similarity_matrix(envs["source"].tolist())
    assert sim[0, 2] > 0.99 and sim[0, 1] < sim[0, 2]  # the two long ones share their shape


def test_the_iterative_walk_gives_the_same_sequence_as_the_recursive_one():
    for source in (CODE, "x = [f(a, *b, k=c) for a in range(3) if a]\nclass K:\n    def m(self):\n        return 1\n"):
        assert conv.shape_tokens(source) == recursive_shape(source)


def test_a_source_too_deep_for_the_parser_itself_counts_as_unparsable_not_a_crash():
    deep = "x = " + "(" * 5000 + "1" + ")" * 5000
    assert conv.shape_tokens(deep) == []
