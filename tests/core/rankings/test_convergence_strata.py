"""design_convergence's null permutes author labels within environment family: designs that cluster only by
family (every author renders the same family templates) are not "convergence"; similarity beyond the family mix is."""

import pandas as pd

from envduels_dagster.core.rankings import convergence as conv
from tests.helpers.shapes import CODE, GRID

# The same maze with one more method: a design choice beyond the family template.
GRID_PLUS = GRID + '''
    def render(self):
        rows = []
        for y in range({size}):
            rows.append("".join("@" if [x, y] == self.pos else "." for x in range({size})))
        return "\\n".join(rows)
'''


def envs_of(plan: dict[str, list[tuple[str, str]]]) -> pd.DataFrame:
    rows = []
    for author, items in plan.items():
        for i, (family, template) in enumerate(items):
            rows.append((f"{author}.{i}", author, "d", family,
                         template.format(name=f"{author.upper()}{i}", turns=5 + i, size=3 + i)))
    return pd.DataFrame(rows, columns=["env_id", "author", "domain", "family", "source"])


def pair_p(table: pd.DataFrame, a: str, b: str) -> float:
    return float(table.query("scope == 'pair' and author_a == @a and author_b == @b")["p_value"].iloc[0])


# a and b write mostly mazes, c and d mostly code locks; within a family every design is the same template.
FAMILY_ONLY = envs_of({
    "a": [("maze", GRID)] * 5 + [("codelock", CODE)], "b": [("maze", GRID)] * 5 + [("codelock", CODE)],
    "c": [("maze", GRID)] + [("codelock", CODE)] * 5, "d": [("maze", GRID)] + [("codelock", CODE)] * 5})


def test_designs_that_cluster_only_by_family_reject_the_unstratified_null_but_not_the_stratified_one():
    flat, _ = conv.design_convergence(FAMILY_ONLY, n_perm=500, strata=None)
    strat, _ = conv.design_convergence(FAMILY_ONLY, n_perm=500)
    assert strat["null_strata"].eq("author labels permuted within family").all()
    assert flat["null_strata"].eq("unstratified").all()
    # Unstratified: a and b look converged (and c and d), the overall row looks like "distinct styles".
    assert pair_p(flat, "a", "b") < 0.01 and pair_p(flat, "c", "d") < 0.01
    # Stratified: nothing beyond the family mix, no pair is rejected, even before Holm.
    pairs = strat[strat["scope"] == "pair"]
    assert (pairs["p_value"] > 0.05).all(), pairs[["author_a", "author_b", "p_value"]]
    assert float(strat.loc[strat["scope"] == "overall", "p_value"].iloc[0]) > 0.05


def test_the_stratified_null_still_finds_a_shared_design_beyond_the_family():
    envs = envs_of({
        "a": [("maze", GRID_PLUS)] * 3 + [("codelock", CODE)] * 3,
        "b": [("maze", GRID_PLUS)] * 3 + [("codelock", CODE)] * 3,
        "c": [("maze", GRID)] * 3 + [("codelock", CODE)] * 3, "d": [("maze", GRID)] * 3 + [("codelock", CODE)] * 3})
    table, _ = conv.design_convergence(envs, n_perm=500)
    assert pair_p(table, "a", "b") < 0.01 and pair_p(table, "c", "d") < 0.01
    assert pair_p(table, "a", "c") > 0.5


def test_the_permutation_keeps_each_stratum_and_each_author_count():
    import numpy as np

    labels = np.array([0, 0, 1, 1, 2, 2, 0, 1])
    strata = np.array(["x", "x", "x", "y", "y", "y", "y", "x"])
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(50):
        perm = conv.stratified_permutation(rng, labels, strata)
        for s in ("x", "y"):
            assert sorted(perm[strata == s]) == sorted(labels[strata == s])
        seen.add(tuple(perm))
    assert len(seen) > 5  # it does shuffle
