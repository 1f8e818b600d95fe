"""Negative and positive controls: the pipeline finds role separation and a skill-improvement correlation
only when the simulation plants them.

Why: in the default profiles the author knobs are monotone in solver skill, so the demo's "findings" are
inputs. The negative-control registry (tests/registries/negative_control.yaml) makes authoring independent
of skill; the rankings code (core.rankings.leaderboard.compute_rankings, what the ``rankings`` asset runs) must then
report a role correlation whose interval covers 0, and authoring_progress (core.rankings.progress: progress_table,
skill_vs_change) no significant skill-improvement correlation; planted ones are recovered, on synthetic stats and,
for role separation, through the pipeline (tests/registries/planted_control.yaml).
"""


import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from envduels_dagster.core.models.registry import load_registry
from envduels_dagster.sim.profiles import AUTHOR_KNOBS, PROFILES, get_profile
from envduels_dagster.sim.provider import profile_for_model_string as sim_profile
from tests.helpers.paths import REGISTRIES


def profiles_of(registry: str):
    return [get_profile(sim_profile(m.model)) for m in load_registry(REGISTRIES / registry).models]


def test_negative_control_registry_makes_every_author_knob_independent_of_skill():
    profiles = profiles_of("negative_control.yaml")
    assert sorted(p.skill_rank for p in profiles) == [1, 2, 3, 4, 5]  # solvers still differ ...
    for knob in AUTHOR_KNOBS:  # ... authors do not: one value per knob across the five models
        assert len({getattr(p, knob) for p in profiles}) == 1, knob
    assert {p.precision for p in profiles} == {p.precision for p in PROFILES.values()}


def test_planted_control_registry_plants_hint_quality_against_skill_and_nothing_else():
    profiles = profiles_of("planted_control.yaml")
    assert [p.skill_rank for p in profiles] == [1, 2, 3, 4, 5]
    assert [p.hint_quality for p in profiles] == [0.0, 0.0, 0.5, 1.0, 1.0]  # the stronger the solver, the worse
    for knob in AUTHOR_KNOBS:  # every other author knob: one value across the five models
        if knob != "hint_quality":
            assert len({getattr(p, knob) for p in profiles}) == 1, knob
    assert profiles[0].sloppiness == 0.0 and profiles[0].difficulty == get_profile("oracle@neutral").difficulty
    assert {p.precision for p in profiles} == {p.precision for p in PROFILES.values()}


def test_default_profiles_plant_the_correlations_the_readme_states():
    """README: hint quality, difficulty and feedback gain are monotone-ish in solver skill (rank 1 = strongest)."""
    profiles = profiles_of("positive_control.yaml")
    rank = [p.skill_rank for p in profiles]
    rho = {k: spearmanr(rank, [getattr(p, k) for p in profiles])[0] for k in ("hint_quality", "difficulty",
                                                                            "feedback_gain")}
    # skill order = -rank: hint quality falls with skill, difficulty rises, feedback gain falls
    assert rho == pytest.approx({"hint_quality": 0.7, "difficulty": -1.0, "feedback_gain": 1.0})


def test_author_style_changes_authoring_only():
    p = get_profile("oracle@novice")
    assert (p.precision, p.skill_rank) == (PROFILES["oracle"].precision, 1)
    assert p.hint_quality == PROFILES["novice"].hint_quality and p.difficulty == PROFILES["novice"].difficulty
    with pytest.raises(KeyError, match="unknown author style 'nobody'"):
        get_profile("oracle@nobody")


def warehouse(rng, skill, author_lift, envs: int = 12, seeds: int = 4):
    """env_solver_stats and duels of one tournament: solver s has cold rate base + skill[s]; author a's hints
    lift every peer by author_lift[a] (+ noise per environment)."""
    from envduels_dagster.core.stats import env_solver_stats, pair_lift

    names = [f"m{i}" for i in range(len(skill))]
    rows = []
    for a, author in enumerate(names):
        base = rng.uniform(0.05, 0.3, envs)
        lift = np.clip(author_lift[a] + rng.uniform(-0.1, 0.1, envs), 0, 1)
        for s, solver in enumerate(names):
            p_cold = np.clip(base + skill[s], 0, 1)
            p_hint = np.clip(p_cold + lift, 0, 1)
            for e in range(envs):
                for seed in range(seeds):
                    for cond, p in (("cold", p_cold[e]), ("hinted", p_hint[e])):
                        rows.append({"env_id": f"{author}.e{e}", "author": author, "solver": solver,
                                     "condition": cond, "seed": seed,
                                     "status": "success" if rng.random() < p else "failure"})
    episodes = pd.DataFrame(rows)
    stats = env_solver_stats(episodes)
    stats["is_self_pair"] = stats["author"] == stats["solver"]
    return stats, pair_lift(episodes, n_boot=50)


def duels_from(pl: pd.DataFrame) -> pd.DataFrame:
    """Welch duels of the authors' peer lifts (the dbt `duels` mart's rule, enough for role separation)."""

    peer = pl[~pl["is_self_pair"]] if "is_self_pair" in pl else pl[pl["author"] != pl["solver"]]
    means = peer.groupby("author")["lift"].mean()
    names = sorted(means.index)
    return pd.DataFrame([{"model_a": a, "model_b": b, "score_a": 1.0 if means[a] > means[b] else 0.0,
                          "outcome": "a" if means[a] > means[b] else "b", "lift_diff": means[a] - means[b],
                          "lift_diff_se": 0.05, "diff_df": 10.0, "lift_diff_lower": means[a] - means[b] - 0.1,
                          "lift_diff_upper": means[a] - means[b] + 0.1}
                         for i, a in enumerate(names) for b in names[i + 1:]])


SKILL = np.linspace(0.3, 0.0, 6)  # m0 strongest solver


@pytest.mark.parametrize("control,author_lift", [
    ("negative", np.full(6, 0.25)),  # every author hints equally well: no role separation exists
    ("positive", np.linspace(0.05, 0.45, 6)),  # planted: the stronger the solver, the worse its hints
])
@pytest.mark.slow  # a few seconds or more (measured with --durations, loaded 2-core machine)
def test_role_separation_is_found_only_when_planted(control, author_lift):
    from envduels_dagster.core.rankings.leaderboard import RankingConfig, compute_rankings

    covers, rejects, rhos = 0, 0, []
    for g in range(8):
        stats, pl = warehouse(np.random.default_rng(100 + g), SKILL, author_lift)
        _, summary = compute_rankings(stats, duels_from(pl), RankingConfig(n_boot=200, seed=g))
        s = summary.iloc[0]
        rhos.append(s.role_rho)
        covers += bool(s.role_rho_lower <= 0 <= s.role_rho_upper)
        rejects += bool(s.role_p_value < 0.05)
    if control == "negative":
        assert covers >= 6 and rejects <= 1, (covers, rejects, rhos)
    else:  # solver rank and author rank run opposite ways: rho near -1, decided in most tournaments
        assert np.mean(rhos) < -0.7 and rejects >= 6, (covers, rejects, rhos)


def two_round_warehouse(rng, skill, hint_gain, envs: int = 8, seeds: int = 4):
    """environments and episodes of round 0 and one hardening round (what ``authoring_progress`` reads):
    solver s has cold rate base + skill[s] in every round; author a's child of each environment lifts its peers
    by the parent's lift + hint_gain[a] (the role of ``feedback_gain``: how much an author improves its hints)."""
    names = [f"m{i}" for i in range(len(skill))]
    env_rows, rows = [], []
    for a, author in enumerate(names):
        for e in range(envs):
            base, lift0 = rng.uniform(0.0, 0.3), rng.uniform(0.1, 0.3)
            parent = f"{author}.r0.e{e}"
            for round_, env_id, lift in ((0, parent, lift0),
                                         (1, f"{author}.r1.e{e}", lift0 + hint_gain[a] + rng.normal(0, 0.02))):
                env_rows.append({"env_id": env_id, "author": author, "round": round_, "valid": True,
                                 "parent_env_id": parent if round_ else None})
                for s, solver in enumerate(names):
                    p_cold = np.clip(base + skill[s], 0, 1)
                    p_hint = np.clip(p_cold + lift, 0, 1)
                    for seed in range(seeds):
                        for cond, p in (("cold", p_cold), ("hinted", p_hint)):
                            rows.append({"env_id": env_id, "author": author, "solver": solver, "round": round_,
                                         "condition": cond, "seed": seed,
                                         "status": "success" if rng.random() < p else "failure"})
    return pd.DataFrame(env_rows), pd.DataFrame(rows)


@pytest.mark.parametrize("control,hint_gain", [
    ("negative", np.full(6, 0.2)),  # every author improves its hints equally: no skill-improvement correlation
    ("positive", np.linspace(0.0, 0.4, 6)),  # planted as feedback_gain is in the defaults: weaker authors adapt more
])
def test_skill_improvement_correlation_is_found_only_when_planted(control, hint_gain):
    """What the ``authoring_progress`` asset publishes (progress_table, then skill_vs_change: Spearman rho and an
    exact permutation p over the 6 authors; no interval) on 8 synthetic two-round tournaments. Measured when
    written: negative 0/8 rejected on either change; positive hint change mean rho -0.91, 6/8 rejected."""
    from envduels_dagster.core.rankings.progress import progress_table, skill_vs_change

    skill = np.linspace(0.4, 0.0, 6)  # m0 strongest solver
    figures = []
    for g in range(8):
        envs, episodes = two_round_warehouse(np.random.default_rng(200 + g), skill, hint_gain)
        progress = progress_table(envs, episodes)
        assert list(progress["n_pairs"]) == [8] * 6
        assert spearmanr(progress["solver_skill"], skill)[0] >= 0.8  # skill is measured, from round-0 cold play
        figures.append(skill_vs_change(progress))
    f = pd.DataFrame(figures)
    hint_rejects = int((f["skill_vs_hint_change_p"] < 0.05).sum())
    design_rejects = int((f["skill_vs_design_change_p"] < 0.05).sum())
    assert design_rejects <= 1, f  # cold play is unchanged across rounds in both controls
    if control == "negative":
        assert hint_rejects <= 1, f
    else:  # the stronger the solver, the less its hints improve: rho near -1, decided in most tournaments
        assert f["skill_vs_hint_change_rho"].mean() < -0.7 and hint_rejects >= 5, f


# ------------------------------------------------------------------ end to end, through the simulated models
# The negative-control registry through the real pipeline (materialize_all: registry, authoring, every pair, dbt marts,
# rankings, one hardening round and its pairs, authoring_progress; not the per-learner assets and the studies, which no
# test here reads: 22 s less, 100 s alone on 2 quiet cores, 1 Dec 2026) at 5 environments per author (so every author
# keeps the 3 valid ones the role interval needs) and 4 seeds. Measured on the shared 2-core machine, with the learner
# assets: 131-140 s at load 3.2-5 (64 s CPU); 4 environments x 3 seeds saved only 15 s (125 s, its role rho -0.9, p =
# 0.08, min 3 environments: too close to both edges), so the scale stays. The planted solver skill is the positive
# control of the same run (the scale has the power to find what is planted); the planted role separation of the default
# profiles is not recovered at this scale (positive_control.yaml, 4 envs: rho -0.3 [-0.9, 0.1]: they mix hint quality
# with difficulty and sloppiness). planted_control.yaml plants it alone (hint_quality 0, 0, 0.5, 1, 1 from the strongest
# solver down, every other author knob equal) and runs in the same fixture, in a child process meanwhile, at 6
# environments (all valid) x 4 seeds, round 0: measured 1 Dec 2026 over benchmark seeds 0-3 / 4-7 / 8-11 / 12-15, role
# rho -1.0 [-1.0, -0.3], -0.9 [-1.0, -0.5], -0.9 [-1.0, -0.41], -1.0 [-1.0, -0.7]. Five distinct hint levels were not
# robust (upper bound up to 0.00 at 5 and at 8 environments; docs/STATISTICS.md, Controls). With a hardening round the
# same runs gave skill -> hint change rho +0.9, +1.0, +0.7, +0.9 (p 0.017-0.23), the consequence of the hint levels
# under the hardening rule; not tested here (+25-65 s of fixture), so skill -> improvement stays on the compute path
# (test_skill_improvement_correlation_is_found_only_when_planted).


ENVS, PLANTED_ENVS, SEEDS = 5, 6, (0, 1, 2, 3)


@pytest.fixture(scope="module")
def control_pipelines(tmp_path_factory):
    """Both end-to-end controls at once: the planted one in a child process (tests/helpers/control_run.py: its
    own ENVDUELS_HOME, so nothing process-wide is shared), the negative one here meanwhile. Both are mostly CPU,
    so on two shared cores the pair costs more than one: 76 s against 66 s quiet, 108 s against 90 s at loadavg
    2-5 (docs/BENCHMARKS.md)."""
    from tests.helpers.control_run import finish_control, run_control, start_control

    planted_tmp = tmp_path_factory.mktemp("planted_control")
    # Round 0 only, without the per-learner assets: its tests read the rankings. The hardening round would add the
    # skill -> hint change (measured: rho +0.7..+1.0, p 0.017-0.23) at +25-65 s of fixture, so it is not run.
    child = start_control(planted_tmp, "planted_control.yaml", PLANTED_ENVS, SEEDS, rounds=0, learners=False)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("ENVDUELS_ROUNDS", "1")  # one hardening round: authoring_progress needs a parent -> child change
            # without the per-learner assets and the studies too: no test here reads them
            negative = run_control(tmp_path_factory.mktemp("negative_control"), "negative_control.yaml", ENVS, SEEDS,
                                   learners=False)
    except BaseException:
        child.kill()
        child.wait()
        raise
    return {"negative": negative, "planted": finish_control(child, planted_tmp)}


@pytest.fixture(scope="module")
def negative_pipeline(control_pipelines):
    return control_pipelines["negative"]


@pytest.fixture(scope="module")
def planted_pipeline(control_pipelines):
    return control_pipelines["planted"]


def _read(db, sql):
    import duckdb

    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(sql).df()


@pytest.mark.slow
def test_negative_control_pipeline_finds_no_role_separation(negative_pipeline):
    db, _, _ = negative_pipeline
    assert int(_read(db, "SELECT count(*) AS n FROM environments WHERE valid AND round = 0")["n"][0]) >= 10
    s = _read(db, "SELECT * FROM rankings_summary").iloc[0]
    assert int(s.role_n_models) == 5 and int(s.role_min_envs_per_author) >= 3
    assert s.role_rho_reason is None or pd.isna(s.role_rho_reason), s.role_rho_reason  # the interval is published
    assert s.role_rho_lower <= 0 <= s.role_rho_upper, (s.role_rho, s.role_rho_lower, s.role_rho_upper)
    assert s.role_p_value > 0.05


@pytest.mark.slow
def test_negative_control_pipeline_finds_no_skill_improvement_correlation(negative_pipeline):
    """The figures the ``authoring_progress`` asset publishes (skill_vs_change: Spearman rho between an author's
    round-0 solver skill and its round-1 design / hint change, exact permutation p over the 5 authors; and
    skill_change_interval, withheld here: 3-5 lineage pairs an author, below its minimum of 12). Measured when
    written: design rho +0.80, p = 0.13; hint rho -0.50, p = 0.45."""
    from envduels_dagster.core.checks.results import skill_change_problems
    from envduels_dagster.core.rankings.progress import MIN_PAIRS, skill_vs_change

    db, _, metadata = negative_pipeline
    progress = _read(db, "SELECT * FROM authoring_progress WHERE round = 1")
    assert len(progress) == 5 and (progress["n_pairs"] >= 3).all(), progress
    published = {k: float(metadata[k]) for k in skill_vs_change(progress)}
    assert published == pytest.approx(skill_vs_change(progress))  # the asset publishes what the table gives
    for change in ("design", "hint"):
        rho, p = published[f"skill_vs_{change}_change_rho"], published[f"skill_vs_{change}_change_p"]
        assert p > 0.05, (change, rho, p)
        assert np.isnan(float(metadata[f"skill_vs_{change}_change_lower"]))  # NULL, with its reason and sizes
        assert metadata[f"skill_vs_{change}_change_reason"].startswith("insufficient data: an author has"), metadata
    assert metadata["skill_vs_change_n_authors"] == 5 and metadata["skill_vs_change_min_pairs"] < MIN_PAIRS
    assert metadata["skill_vs_change_n_pairs"] == int(progress["n_pairs"].sum())
    assert not any(skill_change_problems(metadata).values()), skill_change_problems(metadata)


@pytest.mark.slow
@pytest.mark.parametrize("control", ["negative", "planted"])
def test_control_pipelines_still_recover_the_planted_solver_skill(control_pipelines, control):
    """Both registries keep the five default solvers: their order is recovered whatever the authoring."""
    from scipy.stats import kendalltau

    db, registry, _ = control_pipelines[control]
    skill = {m.name: get_profile(sim_profile(m.model)).skill_rank for m in load_registry(registry).models}
    table = _read(db, "SELECT model, solver_rank, author_rank, author_score FROM rankings")
    tau = kendalltau(table["solver_rank"], table["model"].map(skill))[0]
    assert tau >= 0.6, table  # 5 models: at most 2 of the 10 pairs out of order


# The planted control (planted_control.yaml) through the same pipeline at the same scale, run by the same fixture
# side by side with the negative one. Assertions print the figures.


def _role_figures(s) -> str:
    return (f"role rho {s.role_rho:+.2f} [{s.role_rho_lower:+.2f}, {s.role_rho_upper:+.2f}], p = {s.role_p_value:.3f}, "
            f"{int(s.role_n_models)} models, min {int(s.role_min_envs_per_author)} environments an author, "
            f"reason {s.role_rho_reason!r}")


@pytest.mark.slow
def test_planted_control_pipeline_recovers_the_role_separation(planted_pipeline):
    """Planted: solver rank and author rank opposite (population rho -1 up to the ties of the styles). The test
    asserts the published interval excludes 0 and rho <= -0.7, not p: with 5 models the exact permutation p is
    at least 1/60 (rho = -1) and rho = -0.9 gives 0.083."""
    from envduels_dagster.core.rankings.leaderboard import ROLE_MIN_ENVS

    db, _, _ = planted_pipeline
    s = _read(db, "SELECT * FROM rankings_summary").iloc[0]
    figures = _role_figures(s)
    assert int(s.role_n_models) == 5 and int(s.role_min_envs_per_author) >= ROLE_MIN_ENVS, figures  # all 6 valid
    assert s.role_rho_reason is None or pd.isna(s.role_rho_reason), figures  # the interval is published
    assert s.role_rho_upper < 0, figures
    assert s.role_rho <= -0.7, figures
