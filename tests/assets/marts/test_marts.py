"""The dbt marts through Dagster: a real ``dbt build`` (dbt-duckdb) on a small warehouse, dbt tests as asset
checks, then the Python ``rankings`` and ``design_convergence`` assets on the marts.

One warehouse holds three independent scenarios, so a single dbt run serves every test here:
* the hand-made episode table of test_stats.py (author A; solvers S, T and A itself), plus an invalid
  environment with stray episodes (author B) that the marts must ignore;
* a three-model tournament X > Y > Z whose duels are decisive and transitive;
* 150 synthetic pairs (30 environments x 4 seeds, true lift 0.2) for the coverage of the SQL interval;
* a hardening round 1 of the tournament (the live-UI case): X keeps its environments (byte-identical copies,
  new env_ids), Y hardens its own, and Z, present in round 0, writes nothing in round 1 and played only two of
  X's round-1 environments. Every round-0 figure must be what it was without round 1 (rounds never pool).
"""

from __future__ import annotations

import json

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.marts.assets import design_convergence, rankings
from envduels_dagster.assets.marts.dbt import build_dbt_marts, dbt_resource
from envduels_dagster.assets.marts.project import marts_project, prepare_manifest
from envduels_dagster.core.stats import env_solver_stats as py_env_solver_stats
from envduels_dagster.core.stats import pair_lift as py_pair_lift
from envduels_dagster.core.storage.warehouse import ensure_schema
from envduels_dagster.resources import DuelSettings
from envduels_dagster.resources.io_managers import PUBLISHED_IO_MANAGER_KEY, PublishedTableIOManager
from tests.helpers.hand_stats import HAND_PAIRS, HAND_STATS, TRUE_LIFT, episodes, hand_table, seeds

pytestmark = pytest.mark.slow  # one real dbt build (~20-50 s on this machine) serves the module

MARTS = ["env_solver_stats", "pair_lift_bootstrap", "pair_lift", "author_scores", "solver_scores", "duels"]
N_COVERAGE = 150

MAZE = '''
class {name}:
    def __init__(self, max_turns=8):
        self.max_turns = max_turns

    def reset(self, seed):
        self.pos, self.goal = 0, seed % {size} + 1
        return "corridor", {{}}

    def step(self, action):
        self.pos += 1 if action == "forward" else -1
        done = self.pos == self.goal
        return f"at {{self.pos}}", float(done), done, False, {{}}
'''

LOCK = '''
import random

class {name}:
    def __init__(self, max_turns=6):
        self.max_turns = max_turns

    def reset(self, seed):
        self.code = random.Random(seed).randint(0, {size})
        self.tries = 0
        return "locked", {{}}

    def step(self, action):
        self.tries += 1
        if action.strip() == str(self.code):
            return "open", 1.0, True, False, {{}}
        return ("higher" if action < str(self.code) else "lower"), 0.0, False, self.tries >= self.max_turns, {{}}
'''


def tournament() -> pd.DataFrame:
    """X's environments give every other solver lift 1 or 0.75, Y's 0.5 or 0.25, Z's 0.25 or 0 (six
    environments each, half of each kind): mean lifts 0.875, 0.375, 0.125, decisive and transitive duels."""
    hinted = {"X": ([1, 1, 1, 1], [1, 1, 1, 0]), "Y": ([1, 1, 0, 0], [1, 0, 0, 0]), "Z": ([1, 0, 0, 0], [0, 0, 0, 0])}
    rows = []
    for author, kinds in hinted.items():
        for e in range(6):
            for solver in hinted:
                if solver != author:
                    rows += seeds(f"{author}.{e}", author, solver, [0, 0, 0, 0], kinds[e % 2])
    return episodes(rows)


def round_one() -> pd.DataFrame:
    """Round 1 of the tournament: X's kept copies X.r1.e give Y the lifts X.e gave it; Y's hardened Y.r1.e
    give X lift 0.5 or 0; Z (no round-1 environments) played only X.r1.0 and X.r1.1, so most of X's
    round-1 environments have no result for Z (the draws of a bootstrap replicate can all miss them)."""
    hinted = {"X": ([1, 1, 1, 1], [1, 1, 1, 0]), "Y": ([1, 1, 0, 0], [0, 0, 0, 0])}
    rows = []
    for e in range(6):
        rows += seeds(f"X.r1.{e}", "X", "Y", [0, 0, 0, 0], hinted["X"][e % 2])
        rows += seeds(f"Y.r1.{e}", "Y", "X", [0, 0, 0, 0], hinted["Y"][e % 2])
    for e in range(2):
        rows += seeds(f"X.r1.{e}", "X", "Z", [0, 0, 0, 0], [1, 1, 0, 0])
    df = episodes(rows)
    df["round"] = 1
    return df


def coverage_pairs(rng: np.random.Generator) -> pd.DataFrame:
    """Author cov### x solver learner: p_cold ~ U(.1,.5), env lift ~ U(0,.4) (true mean 0.2), 4 paired seeds."""
    frames = []
    for i in range(N_COVERAGE):
        p_cold = rng.uniform(0.1, 0.5, 30)
        p_hint = p_cold + rng.uniform(0.0, 0.4, 30)
        cold = rng.random((30, 4)) < p_cold[:, None]
        hint = rng.random((30, 4)) < p_hint[:, None]
        env = np.repeat([f"cov{i:03d}.{e:02d}" for e in range(30)], 4)
        seed = np.tile(np.arange(4), 30)
        for cond, y in (("cold", cold), ("hinted", hint)):
            frames.append(pd.DataFrame({"env_id": env, "author": f"cov{i:03d}", "solver": "learner",
                                        "condition": cond, "seed": seed,
                                        "status": np.where(y.ravel(), "success", "failure")}))
    return pd.concat(frames, ignore_index=True)


def environments() -> pd.DataFrame:
    rows = [("E1", "A", "d1", "maze", MAZE.format(name="Walk", size=3), True),
            ("E2", "A", "d2", "codelock", LOCK.format(name="Safe", size=9), True),
            ("E4", "A", "d1", "maze", "class Broken(:", False),
            ("E3", "B", "d1", "maze", MAZE.format(name="Stray", size=2), False)]
    for author in "XYZ":
        rows += [(f"{author}.0", author, "navigation", "maze", MAZE.format(name=f"{author}Maze", size=4), True),
                 (f"{author}.1", author, "deduction", "codelock", LOCK.format(name=f"{author}Lock", size=50), True)]
    df = pd.DataFrame(rows, columns=["env_id", "author", "domain", "family", "source", "valid"])
    df["round"] = 0
    # Round 1: X's kept copies (same source, new env_id, parent set), Y's hardened lock plus one rejected.
    kept = df[df["author"] == "X"].assign(round=1, parent_env_id=lambda d: d["env_id"],
                                          env_id=lambda d: d["env_id"].str.replace("X.", "X.r1.", regex=False))
    hardened = pd.DataFrame([("Y.r1.0", "Y", "deduction", "codelock", LOCK.format(name="YLock2", size=90), True, 1),
                             ("Y.r1.9", "Y", "deduction", "codelock", "class Broken(:", False, 1)],
                            columns=["env_id", "author", "domain", "family", "source", "valid", "round"])
    df = pd.concat([df, kept, hardened], ignore_index=True)
    df["reject_reason"] = np.where(df["valid"], None, "test: invalid")
    return df


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("marts")
    db = tmp / "warehouse.duckdb"
    stray = episodes(seeds("E3", "B", "S", [0, 0, 0, 0], [1, 1, 1, 1]))
    all_episodes = pd.concat([hand_table(), stray, tournament(), coverage_pairs(np.random.default_rng(7))],
                             ignore_index=True).assign(round=0)
    # Seeds 10-13 of E1 x T, played by the adaptive sampler only because seed 0 left its verdict open
    # (sampling = 'adaptive'): hinted 0, cold 1 would move E1 x T and A x T if the marts counted them
    # (HAND_STATS / HAND_PAIRS say they do not).
    conditional = episodes(seeds("E1", "A", "T", [1, 1, 1, 1], [0, 0, 0, 0])).assign(
        seed=lambda d: d["seed"] + 10, round=0, sampling="adaptive")
    all_episodes = pd.concat([all_episodes, round_one(), conditional], ignore_index=True)
    all_episodes["is_self_pair"] = all_episodes["author"] == all_episodes["solver"]
    models = ["A", "B", "S", "T", "X", "Y", "Z", "learner"]
    registry = pd.DataFrame({"name": models, "model": [f"openai/{m}" for m in models]})
    with duckdb.connect(str(db)) as conn:
        ensure_schema(conn)
        for table, df in (("episodes", all_episodes), ("environments", environments()),
                          ("model_registry", registry)):
            conn.register("df", df)
            conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM df")
            conn.unregister("df")
    prepare_manifest()
    result = dg.materialize(
        [build_dbt_marts(), rankings, design_convergence], instance=dg.DagsterInstance.ephemeral(),
        resources={"dbt": dbt_resource(), "warehouse": DuckDBResource(database=str(db)), "settings": DuelSettings(),
                   # rankings stages its published snapshot (promoted by its checks, not selected here)
                   PUBLISHED_IO_MANAGER_KEY: PublishedTableIOManager(root=str(tmp / "published"))},
        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}},
                    "ops": {"rankings": {"config": {"n_boot": 300, "n_perm": 1000}},
                            "design_convergence": {"config": {"n_perm": 200}}}},
        raise_on_error=False,
    )
    return result, db, all_episodes


def query(db, sql: str) -> pd.DataFrame:
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(sql).df()


def test_marts_materialize_and_every_dbt_test_passes_as_an_asset_check(built):
    result, db, _ = built
    assert result.success
    keys = {e.materialization.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert keys == {*MARTS, "rankings", "design_convergence"}
    evaluations = result.get_asset_check_evaluations()
    manifest = json.loads(marts_project().manifest_path.read_text())
    dbt_tests = {n["name"] for n in manifest["nodes"].values() if n["resource_type"] == "test"}
    assert {e.check_name for e in evaluations} == dbt_tests and len(dbt_tests) >= 40
    failed = [e.check_name for e in evaluations if not e.passed]
    assert failed == []
    checked = {e.asset_key.to_user_string() for e in evaluations}
    assert {"env_solver_stats", "pair_lift", "duels", "author_scores", "solver_scores"} <= checked
    tables = set(query(db, "SELECT table_name FROM information_schema.tables")["table_name"])
    assert {*MARTS, "rankings", "rankings_summary", "design_convergence", "design_convergence_clusters"} <= tables


def test_dbt_lineage_reaches_the_python_assets():
    from envduels_dagster.definitions import defs

    graph = defs().resolve_asset_graph()
    parents = {k.to_user_string() for k in graph.get(dg.AssetKey("env_solver_stats")).parent_keys}
    assert {"duel_episodes", "authored_environments"} <= parents
    assert dg.AssetKey("model_registry") in graph.get(dg.AssetKey("rankings")).parent_keys
    assert graph.get(dg.AssetKey("pair_lift")).group_name == "marts"


def test_sql_env_solver_stats_matches_hand_values_and_python(built):
    _, db, all_episodes = built
    sql = query(db, "SELECT * FROM env_solver_stats WHERE author IN ('A', 'B')").set_index(["env_id", "solver"])
    assert set(sql.index) == set(HAND_STATS)  # E3 (invalid, author B) is left out
    cols = ["n_seeds", "p_cold", "p_hint", "lift", "rescue", "harm", "category"]
    for key, expected in HAND_STATS.items():
        for col, value in zip(cols, expected):
            actual = sql.loc[key, col]
            assert (pd.isna(actual) if value is None else actual == pytest.approx(value) if not isinstance(value, str)
                    else actual == value), (key, col, actual, value)
    py = py_env_solver_stats(hand_table()).set_index(["env_id", "solver"])
    pd.testing.assert_frame_equal(sql.loc[py.index, cols], py[cols], check_dtype=False)
    assert sql.loc[("E2", "S"), "n_incomplete"] == 1 and sql.loc[("E1", "S"), "domain"] == "d1"


def test_sql_pair_lift_matches_hand_values_and_python(built):
    _, db, _ = built
    sql = query(db, "SELECT * FROM pair_lift WHERE author = 'A'").set_index(["author", "solver"])
    py = py_pair_lift(hand_table(), n_boot=200).set_index(["author", "solver"])
    for key, (n_envs, n_matched, n_incomplete, p_cold, p_hint, lift) in HAND_PAIRS.items():
        row = sql.loc[key]
        assert (row.n_envs, row.n_matched, row.n_incomplete) == (n_envs, n_matched, n_incomplete)
        assert (row.p_cold, row.p_hint, row.lift) == pytest.approx((p_cold, p_hint, lift))
        assert (row.p_cold, row.p_hint, row.lift) == pytest.approx(tuple(py.loc[key, ["p_cold", "p_hint", "lift"]]))
        # the diagnostic bootstrap is withheld below lift_boot_min_envs (30), with the Python mirror's reason
        assert pd.isna(row.lift_boot_lower) and pd.isna(row.lift_boot_upper)
        assert row.lift_boot_reason == py.loc[key, "lift_boot_reason"]
        assert row.lift_boot_reason.startswith(f"not calibrated: {n_envs} environment")
        assert row.is_self_pair == (key[0] == key[1])
    # its replicates are still built: two environments with lifts 0.25 and 0.75 resample to 0.25, 0.5 or 0.75
    reps = query(db, "SELECT quantile_cont(lift, 0.025) AS lo, quantile_cont(lift, 0.975) AS hi FROM pair_lift_bootstrap "
                     "WHERE author = 'A' AND solver = 'S' AND round = 0")
    assert (reps["lo"][0], reps["hi"][0]) == pytest.approx((0.25, 0.75))
    assert query(db, "SELECT count(*) AS n FROM pair_lift WHERE author = 'B'")["n"][0] == 0


def test_sql_author_and_solver_scores_hand_computed(built):
    _, db, _ = built
    a = query(db, "SELECT * FROM author_scores WHERE round = 0").set_index("author")
    # Peers S, T: E1 cold (0.25, 1) -> |0.75| / floor(4/4); E2 (0, 0) -> 0. Peer lift: E1 (0.25 + 0)/2, E2 (0.75 + 0)/2.
    assert (a.loc["A", "design_score"], a.loc["A", "hint_score"]) == pytest.approx((0.375, 0.25))
    assert (a.loc["A", "n_written"], a.loc["A", "n_valid"]) == (3, 2)
    assert a.loc["A", "validity_rate"] == pytest.approx(2 / 3)
    assert a.loc["B", "validity_rate"] == 0.0 and pd.isna(a.loc["B", "design_score"])
    s = query(db, "SELECT * FROM solver_scores WHERE round = 0").set_index("solver")
    assert tuple(s.loc["S", ["cold_success", "hinted_success", "hint_gain"]]) == pytest.approx((0.125, 0.625, 0.5))
    assert tuple(s.loc["T", ["cold_success", "hinted_success", "hint_gain"]]) == pytest.approx((0.5, 0.5, 0.0))
    assert "A" not in s.index  # A only played its own environments


def test_duels_and_rankings_of_a_transitive_tournament(built):
    _, db, _ = built
    duels = query(db, "SELECT * FROM duels WHERE round = 0 ORDER BY model_a, model_b")
    assert duels[["model_a", "model_b", "outcome", "winner"]].values.tolist() == [
        ["X", "Y", "a", "X"], ["X", "Z", "a", "X"], ["Y", "Z", "a", "Y"]]
    assert duels["lift_diff"].tolist() == pytest.approx([0.5, 0.75, 0.25])
    # Welch t over 6 + 6 environments with lifts {1, 0.75} vs {0.5, 0.25}: sd 0.137 each, se 0.079, df 10
    assert (duels["n_envs_a"].tolist(), duels["n_envs_b"].tolist()) == ([6, 6, 6], [6, 6, 6])
    assert duels["diff_df"].tolist() == pytest.approx([10.0, 10.0, 10.0])
    half = 2.2281388520 * np.sqrt(2 * (6 * 0.125 ** 2 / 5) / 6)
    assert duels["lift_diff_lower"].tolist() == pytest.approx([0.5 - half, 0.75 - half, 0.25 - half])
    assert duels["interval_reason"].isna().all() and set(duels["decision_control"]) == {"none (each duel at 5%)"}
    ranks = query(db, "SELECT * FROM rankings").set_index("model")
    assert [ranks.loc[m, "bt_rank"] for m in "XYZ"] == [1.0, 2.0, 3.0]
    assert (ranks.loc["X", "duel_wins"], ranks.loc["Z", "duel_losses"]) == (2, 2)
    for fig in ("solver_score", "author_score"):  # 6 environments an author: the bootstrap interval is withheld
        shown = ranks[fig].notna()
        assert ranks.loc[shown, f"{fig}_lower"].isna().all(), fig
        assert ranks.loc[shown, f"{fig}_interval_reason"].str.contains("at least 30 per author").all(), fig
        t = ranks.loc[shown]  # the t interval: published, or withheld with its own reason
        assert (t[f"{fig}_ci_lower"].notna() | t[f"{fig}_ci_reason"].notna()).all(), fig
    # the mart's tournament is one completion of the population sign set: its strengths lie inside the bounds
    bt = ranks.dropna(subset=["bt_strength"])
    assert ((bt["bt_strength_population_lower"] <= bt["bt_strength"] + 1e-9)
            & (bt["bt_strength"] <= bt["bt_strength_population_upper"] + 1e-9)).all()
    summary = query(db, "SELECT * FROM rankings_summary").iloc[0]
    assert (summary.cyclic_triads, summary.kendall_zeta, summary.n_duels) == (0.0, 1.0, 3)
    assert bool(summary.tournament_complete) and (summary.n_triads, summary.n_triads_complete) == (1, 1)
    assert bool(summary.bt_converged) and summary.duel_decision_control.startswith("holm")
    assert summary.n_decisive_duels_holm == 3  # smallest Welch t is 0.25 / 0.079 = 3.2 on 10 df: p = 0.01


def test_python_duel_rule_reproduces_the_duels_mart(built):
    """The rankings re-decide every duel per environment replicate with core.rankings.tournament's rule; at
    weights 1 it must give the mart's duels exactly, or the tournament intervals would describe another rule."""
    from envduels_dagster.core.rankings.tournament import duels_from_stats

    _, db, _ = built
    for round_ in (0, 1):
        mart = query(db, f"SELECT * FROM duels WHERE round = {round_} ORDER BY model_a, model_b")
        mine = duels_from_stats(query(db, f"SELECT * FROM env_solver_stats WHERE round = {round_}"))
        assert mine[["model_a", "model_b", "outcome"]].values.tolist() == \
            mart[["model_a", "model_b", "outcome"]].values.tolist()
        for col in ("lift_diff", "lift_diff_se", "diff_df", "n_envs_a", "n_envs_b"):
            assert mine[col].to_numpy(float) == pytest.approx(mart[col].to_numpy(float), nan_ok=True), col
    summary = query(db, "SELECT * FROM rankings_summary").iloc[0]
    assert pd.isna(summary.bt_interval_reason) and summary.tournament_min_envs_per_author == 6  # X, Y, Z
    assert "at least 12 per author" in summary.kendall_zeta_reason  # zeta's interval needs more environments
    ranks = query(db, "SELECT * FROM rankings").set_index("model")
    assert (ranks.loc[list("XYZ"), "bt_strength_lower"] <= ranks.loc[list("XYZ"), "bt_strength_upper"]).all()


def test_sql_interval_covers_true_lift(built):
    _, db, _ = built
    cov = query(db, f"""SELECT avg((lift_ci_lower <= {TRUE_LIFT} AND {TRUE_LIFT} <= lift_ci_upper)::INT) AS coverage,
                               count(*) AS n FROM pair_lift WHERE author LIKE 'cov%'""").iloc[0]
    print(f"dbt pair_lift published (lift_ci) interval coverage: {cov.coverage:.3f} over {int(cov.n)} pairs")
    assert cov.n == N_COVERAGE and cov.coverage >= 0.90


def test_design_convergence_tables(built):
    _, db, _ = built
    table = query(db, "SELECT * FROM design_convergence")
    assert set(table["scope"]) == {"overall", "within", "pair"}
    clusters = query(db, "SELECT * FROM design_convergence_clusters")
    spanning = clusters.groupby("cluster_id").agg(authors=("authors", "first"),
                                                  families=("family", lambda f: ",".join(sorted(set(f)))))
    # The same maze and lock designs under different names and constants, written by A, X, Y and Z.
    assert sorted(map(tuple, spanning.values.tolist())) == [("A, X, Y, Z", "codelock"), ("A, X, Y, Z", "maze")]
    assert "E3" not in set(clusters["env_id"])  # only valid environments


def test_sql_author_and_solver_scores_agree_with_the_python_rankings(built):
    """The design score (peer discrimination), hint score and solver score are computed twice: in the dbt
    marts (SQL) and in core.rankings.leaderboard (Python, for the bootstrap). Their point estimates must be equal."""
    _, db, _ = built
    ranks = query(db, "SELECT * FROM rankings").set_index("model")
    authors = query(db, "SELECT * FROM author_scores WHERE n_envs_scored > 0 AND round = 0").set_index("author")
    both = authors.index.intersection(ranks.dropna(subset=["author_score"]).index)
    assert len(both) >= 4  # A, X, Y, Z and the coverage authors
    assert authors.loc[both, "hint_score"].to_numpy() == pytest.approx(ranks.loc[both, "author_score"].to_numpy())
    sql_design, py_design = authors.loc[both, "design_score"], ranks.loc[both, "design_score"]
    assert (sql_design.isna() == py_design.isna()).all() and sql_design.notna().sum() >= 4
    assert sql_design.dropna().to_numpy() == pytest.approx(py_design.dropna().to_numpy())
    solvers = query(db, "SELECT * FROM solver_scores WHERE round = 0").set_index("solver")
    ranked = solvers.index.intersection(ranks.dropna(subset=["solver_score"]).index)
    assert len(ranked) >= 4
    assert solvers.loc[ranked, "cold_success"].to_numpy() == pytest.approx(ranks.loc[ranked, "solver_score"].to_numpy())
    assert solvers.loc[ranked, "hinted_success"].to_numpy() == pytest.approx(ranks.loc[ranked, "solver_hinted"].to_numpy())


def test_sql_t_intervals_equal_the_python_ones(built):
    """pair_lift.lift_ci_* and the duels' Welch interval: one method, written in SQL and in core/stats/intervals.py."""
    from envduels_dagster.core.stats import difference_interval

    _, db, all_episodes = built
    key = ["round", "author", "solver"]
    sql = query(db, "SELECT * FROM pair_lift").set_index(key).sort_index()
    py = py_pair_lift(all_episodes[all_episodes["author"] != "B"], n_boot=10).set_index(key).sort_index()
    assert list(py.index) == list(sql.index)  # the same (round, author, solver) rows, two rounds
    for col in ("n_envs", "n_matched", "n_incomplete", "p_cold", "p_hint", "lift"):
        assert sql[col].to_numpy(dtype=float) == pytest.approx(py[col].to_numpy(dtype=float)), col
    given = sql["lift_ci_reason"].isna()
    # the coverage pairs and round 1's X x Y, Y x X; not given: A (2 environments) x A, S, T and round 1's X x Z
    assert given.sum() >= N_COVERAGE and (~given).sum() == 4
    assert sql["lift_ci_reason"].fillna("").tolist() == py["lift_ci_reason"].fillna("").tolist()
    for col in ("lift_ci_lower", "lift_ci_upper"):
        assert sql.loc[given, col].to_numpy() == pytest.approx(py.loc[given, col].to_numpy(), abs=1e-9)
        assert sql.loc[~given, col].isna().all() and py.loc[~given, col].isna().all()
    assert sql.loc[(0, "A", "S"), "lift_ci_reason"] == "insufficient data: 2 environments (an interval needs at least 3)"
    stats = query(db, "SELECT * FROM env_solver_stats WHERE NOT is_self_pair")
    duels = query(db, "SELECT * FROM duels")
    assert sorted(duels["round"].unique()) == [0, 1]
    for d in duels.itertuples():
        side = lambda a, s: stats[(stats["round"] == d.round) & (stats["author"] == a)  # noqa: E731
                                  & (stats["solver"] == s)]["lift"]
        ci = difference_interval(side(d.model_a, d.model_b), side(d.model_b, d.model_a))
        assert (d.lift_diff, d.lift_diff_lower, d.lift_diff_upper) == pytest.approx((ci.estimate, ci.lower, ci.upper))


def test_sql_t_critical_values_and_minimum_match_python():
    import re

    import yaml
    from scipy.stats import t

    from envduels_dagster.assets.marts.project import DBT_PROJECT_DIR
    from envduels_dagster.core.stats import MIN_ENVS, t_critical
    from envduels_dagster.core.stats.lift import LIFT_BOOT_MIN_ENVS

    macro = (DBT_PROJECT_DIR / "macros" / "t_critical.sql").read_text()
    listed = macro[macro.index("set table = ["):macro.index("] -%}")]
    table = [float(x) for x in re.findall(r"\d+\.\d+", listed)]
    assert len(table) == 100
    assert table == pytest.approx([t.ppf(0.975, df) for df in range(1, 101)], abs=1e-9)
    assert t_critical(4.9) == pytest.approx(t.ppf(0.975, 4))  # floored like the SQL
    project = yaml.safe_load((DBT_PROJECT_DIR / "dbt_project.yml").read_text())
    assert project["vars"]["min_envs_for_interval"] == MIN_ENVS
    assert project["vars"]["lift_boot_min_envs"] == LIFT_BOOT_MIN_ENVS
    with duckdb.connect() as conn:  # the expansion used beyond df 100, evaluated by DuckDB
        z = 1.959963984540054
        for df in (101, 150, 1000):
            sql = (f"SELECT {z} + ({z ** 3 + z}) / (4 * {df}) + ({5 * z ** 5 + 16 * z ** 3 + 3 * z}) / (96 * {df} ^ 2)"
                   f" + ({3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z}) / (384 * {df} ^ 3)")
            assert conn.execute(sql).fetchone()[0] == pytest.approx(t.ppf(0.975, df), abs=1e-7)


def test_rounds_never_pool_and_a_model_absent_from_round_one_builds(built):
    """The live-UI case: Z is in round 0 but wrote nothing in round 1 and played only 2 of X's 6 round-1
    environments. dbt build passed (first test); here: one pair_lift row per (round, author, solver) with
    matched episodes, empty bootstrap replicates dropped (never NaN), kept copies counted once per round."""
    _, db, all_episodes = built
    pairs = query(db, "SELECT round, author, solver, n_envs FROM pair_lift")
    played = query(db, "SELECT DISTINCT round, author, solver FROM env_solver_stats")
    assert len(pairs) == len(played) == len(pairs.merge(played, on=["round", "author", "solver"]))
    r1 = pairs[pairs["round"] == 1].sort_values(["author", "solver"])
    assert r1[["author", "solver", "n_envs"]].values.tolist() == [["X", "Y", 6], ["X", "Z", 2], ["Y", "X", 6]]
    assert pairs.query("round == 0 and author == 'X' and solver == 'Y'")["n_envs"].tolist() == [6]  # not 12
    boot = query(db, """SELECT round, author, solver, count(*) AS reps,
                               count(*) FILTER (WHERE lift IS NULL OR isnan(lift)) AS bad
                        FROM pair_lift_bootstrap GROUP BY ALL""").set_index(["round", "author", "solver"])
    assert boot["bad"].sum() == 0
    # (4/6)^6 = 9% of X x Z replicates draw none of the two environments Z played: dropped, not NaN
    assert 800 < boot.loc[(1, "X", "Z"), "reps"] < 1000 and boot.loc[(1, "X", "Y"), "reps"] == 1000
    z = query(db, "SELECT * FROM pair_lift WHERE round = 1 AND author = 'X' AND solver = 'Z'").iloc[0]
    assert z.lift == pytest.approx(0.5) and pd.isna(z.lift_boot_lower) and z.lift_boot_reason.startswith("not calibrated")
    authors = query(db, "SELECT * FROM author_scores").set_index(["round", "author"])
    assert tuple(authors.loc[(1, "Y"), ["n_written", "n_valid"]]) == (2, 1)
    assert tuple(authors.loc[(1, "X"), ["n_written", "n_valid"]]) == (2, 2)
    assert (1, "Z") not in authors.index and tuple(authors.loc[(0, "Z"), ["n_written", "n_valid"]]) == (2, 2)
    duels = query(db, "SELECT * FROM duels WHERE round = 1")
    assert duels[["model_a", "model_b"]].values.tolist() == [["X", "Y"]]  # X x Z has no return leg in round 1
    solvers = query(db, "SELECT * FROM solver_scores WHERE round = 1").set_index("solver")
    assert sorted(solvers.index) == ["X", "Y", "Z"]
    ranks, summary = query(db, "SELECT * FROM rankings"), query(db, "SELECT * FROM rankings_summary")
    assert set(ranks["round"]) == {0} and summary["round"].tolist() == [0]
    n_round0 = query(db, "SELECT count(DISTINCT env_id) AS n FROM env_solver_stats WHERE round = 0")["n"][0]
    assert summary["n_envs"].tolist() == [n_round0]


def test_rankings_metadata_names_the_lift_grid_control_and_tests_the_pairs_with_a_published_interval(built):
    result, db, _ = built
    [event] = [e for e in result.get_asset_materialization_events()
               if e.materialization.asset_key.to_user_string() == "rankings"]
    meta = {k: getattr(v, "value", v) for k, v in event.materialization.metadata.items()}
    assert meta["lift_grid_multiple_comparison"].startswith("holm")
    # A pair is tested exactly when its published interval is given (3+ environments that vary).
    given = query(db, "SELECT count(*) AS n FROM pair_lift WHERE round = 0 AND NOT is_self_pair "
                      "AND lift_ci_reason IS NULL")["n"][0]
    assert meta["lift_grid_pairs_tested"] == given >= 150
    # The coverage pairs' true lift is 0.2 over 30 environments: 135 of their 150 raw one-sided p are below 0.05
    # (measured), but Holm over 156 pairs asks 0.05/156 of the smallest: 65 decided (BH would decide 131).
    assert 0.2 * given <= meta["lift_grid_pairs_decided"] <= 0.6 * given
    grid = next(v for k, v in meta.items() if k.startswith("lift_grid (round 0"))
    assert "holm" in grid and "[n/a]" in grid  # A's pairs have 2 environments: no interval
