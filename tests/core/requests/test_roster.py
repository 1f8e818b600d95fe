"""Roles -> partitions (``core/requests/roster.py``): who authors, which pairs are played, who learns, what a change adds,
and which rankings mean something. Pure: registries are real files loaded by the real loader, no Dagster."""

from __future__ import annotations

import pytest

from envduels_dagster.core.models.registry import RegistryError, load_registry
from envduels_dagster.core.requests.roster import Newcomers, Roster, RosterError, ranking_scope, roster_from_table
from envduels_dagster.core.requests.stages import plan_new_models, plan_newcomers


def registry_of(tmp_path, entries: dict[str, str | None]):
    """A registry file of simulated models; ``entries`` maps a profile name to its roles line (None: default)."""
    lines = ["models:"]
    for name, roles in entries.items():
        lines += [f"  - name: {name}", f"    model: envduels-sim/{name}"] + ([f"    roles: {roles}"] if roles else [])
    path = tmp_path / "models.yaml"
    path.write_text("\n".join(lines) + "\n")
    return load_registry(path)


EXPERIMENT = {"oracle": "[author]", "expert": "[author]", "journeyman": "[author]", "novice": "[solver]"}


def test_three_authors_and_one_learner_make_three_pairs_and_one_learner(tmp_path):
    roster = Roster.from_registry(registry_of(tmp_path, EXPERIMENT))
    assert roster.authors == ("oracle", "expert", "journeyman") and roster.solvers == ("novice",)
    assert roster.pairs() == [("oracle", "novice"), ("expert", "novice"), ("journeyman", "novice")]
    assert roster.both == [] and roster.models == ["oracle", "expert", "journeyman", "novice"]


def test_the_default_registry_keeps_the_full_tournament_with_self_pairs(tmp_path):
    names = ["oracle", "expert", "novice"]
    roster = Roster.from_registry(registry_of(tmp_path, dict.fromkeys(names)))
    assert roster == Roster.everyone(names)
    assert roster.pairs() == [(a, s) for a in names for s in names]  # 9 pairs, self pairs played and flagged
    assert roster.both == names


def test_a_model_with_both_roles_among_specialists_plays_its_own_self_pair(tmp_path):
    roster = Roster.from_registry(registry_of(tmp_path, {"oracle": "[author]", "expert": None, "novice": "[solver]"}))
    assert roster.pairs() == [("oracle", "expert"), ("oracle", "novice"), ("expert", "expert"), ("expert", "novice")]


def test_imports_author_in_round_zero_only():
    roster = Roster(("oracle",), ("novice",), ("import:paper.alice", "import:paper.bob"))
    assert roster.pairs(0) == [("oracle", "novice"), ("import:paper.alice", "novice"), ("import:paper.bob", "novice")]
    assert roster.pairs(1) == [("oracle", "novice")]
    assert roster.pair_count(rounds=1) == 4


def test_a_new_learner_plays_only_its_column_and_a_new_author_only_its_row():
    roster = Roster(("oracle", "expert", "journeyman"), ("novice", "apprentice"))
    new = roster.newcomers(["oracle", "expert", "journeyman"], ["novice"])
    assert new == Newcomers((), ("apprentice",)) and new.names == ["apprentice"]
    assert roster.pairs_involving(new) == [("oracle", "apprentice"), ("expert", "apprentice"),
                                           ("journeyman", "apprentice")]
    row = roster.newcomers(["oracle", "expert"], ["novice", "apprentice"])
    assert roster.pairs_involving(row) == [("journeyman", "novice"), ("journeyman", "apprentice")]
    assert not roster.newcomers(roster.authors, roster.solvers)


def test_a_learner_that_gains_the_author_role_is_new_as_an_author_only():
    roster = Roster(("oracle", "novice"), ("novice",))
    new = roster.newcomers(["oracle"], ["novice"])
    assert new == Newcomers(("novice",), ())
    assert roster.pairs_involving(new) == [("novice", "novice")]


@pytest.mark.parametrize("entries,missing", [
    ({"oracle": "[author]", "expert": "[author]"}, "no model has the solver role"),
    ({"novice": "[solver]", "expert": "solver"}, "no model has the author role"),
])
def test_a_registry_without_a_solver_or_an_author_is_refused_naming_the_file_and_field(tmp_path, entries, missing):
    registry = registry_of(tmp_path, entries)
    with pytest.raises(RosterError, match=missing) as err:
        Roster.from_registry(registry)
    assert isinstance(err.value, RegistryError)  # the CLI's "registry error", exit 2
    assert str(err.value).startswith(f"{tmp_path / 'models.yaml'}: field 'roles': ")
    assert Roster.from_registry(registry, check=False).pairs() == []  # unchecked: simply nothing to play


def test_imports_alone_are_authors_enough():
    Roster((), ("novice",), ("import:paper.alice",)).require_experiment()


def test_plans_with_roles_add_a_learner_column_through_every_round_without_rehardening():
    authors, solvers = ["oracle", "expert", "journeyman"], ["novice", "apprentice"]
    plan = plan_newcomers("new-1", Roster(tuple(authors), tuple(solvers), ("import:x",)), Newcomers((), ("apprentice",)),
                          rounds=1)
    assert [(s.kind, s.round) for s in plan.stages] == [("pairs", 0), ("pairs", 1), ("downstream", None),
                                                        ("learners", None), ("studies", None)]
    assert plan.stages[0].partitions == ("oracle|apprentice", "expert|apprentice", "journeyman|apprentice",
                                         "import:x|apprentice")
    assert plan.stages[1].partitions == ("oracle|apprentice", "expert|apprentice", "journeyman|apprentice")
    assert plan.stages[3].partitions == ("novice", "apprentice")  # learners: the solver-role models
    assert "authors none, solvers apprentice" in plan.reason


def test_plans_with_roles_give_a_new_author_only_model_its_row_and_its_hardening():
    plan = plan_newcomers("new-2", Roster(("oracle", "expert"), ("novice",)), Newcomers(("expert",), ()), rounds=1)
    assert [(s.kind, s.round, s.partitions) for s in plan.stages[:4]] == [
        ("authors", 0, ("expert",)), ("pairs", 0, ("expert|novice",)),
        ("authors", 1, ("expert",)), ("pairs", 1, ("expert|novice",))]
    with pytest.raises(ValueError, match=r"new solvers \['oracle'\] are not among the registry's solvers"):
        plan_newcomers("x", Roster(("oracle",), ("novice",)), Newcomers((), ("oracle",)), rounds=0)


def test_plans_without_roles_are_the_plans_of_before():
    models = ["a", "b", "c"]
    assert plan_new_models("n", ["c"], models, rounds=1, panel_mode="live") == \
        plan_newcomers("n", Roster.everyone(models), Newcomers(("c",), ("c",)), rounds=1, panel_mode="live")
    pairs = plan_new_models("n", ["c"], models, rounds=0).stages[1].partitions
    assert sorted(pairs) == sorted(["c|a", "c|b", "c|c", "a|c", "b|c"])  # 2N+1


def test_ranking_scope_says_which_rankings_mean_something():
    experiment = ranking_scope(Roster(("oracle", "expert", "journeyman"), ("novice",)))
    assert experiment["author_ranking"].startswith("meaningful: among 3 authors (oracle, expert, journeyman)")
    assert experiment["solver_ranking"].startswith("not meaningful: 1 solver (novice)")
    assert experiment["duels"] == ("not meaningful: 0 model(s) with both roles (none); a duel needs two models that "
                                   "each write and each play the other's environments")
    assert experiment["role_separation"].startswith("not meaningful: 0 model(s) with both roles")
    learners = ranking_scope(Roster(("oracle",), ("novice", "apprentice")))
    assert learners["author_ranking"].startswith("not meaningful: 1 author")
    assert learners["solver_ranking"].startswith("meaningful: among 2 solvers")
    full = ranking_scope(Roster.everyone(["a", "b", "c"]))
    assert all(v.startswith("meaningful") for v in full.values())
    lone = ranking_scope(Roster(("a", "b"), ("a",)))  # the only solver wrote one of the two authors' sets
    assert lone["author_ranking"].startswith("not meaningful: no solver other than the author")


def test_the_registry_table_rows_give_the_same_roster():
    rows = [("oracle", "author"), ("novice", "solver"), ("expert", "author,solver"), ("old", None)]
    roster = roster_from_table(rows, ["oracle", "import:paper.bob", "expert"])
    assert roster == Roster(("oracle", "expert", "old"), ("novice", "expert", "old"), ("import:paper.bob",))


def test_a_model_that_lost_a_role_is_not_rerun_in_it_when_stale():
    roster = Roster(("oracle",), ("novice",))  # expert was an author and a solver; now it is gone from both sides
    authors, pairs = roster.still_wanted(["expert", "oracle"], [("oracle", "expert"), ("expert", "novice"),
                                                                ("oracle", "novice"), ("import:x", "novice")])
    assert authors == ["oracle"] and pairs == [("oracle", "novice"), ("import:x", "novice")]
