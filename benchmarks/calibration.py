"""Calibration: do the published intervals cover the truth, and are null duels decided? (issue 16)

    .venv/bin/python benchmarks/calibration.py [--envs 3 6 12 30] [--groups 25] [--seeds 4] [--n-boot 1000]

Why synthetic warehouses: only there is the truth known. Each warehouse holds ``groups`` independent
tournaments of 4 models (every model authors and solves); a tournament is drawn from a hierarchy:

* environment e of author a: a base cold rate b_e ~ U(0.05, 0.30) + shift_a (shift 0, .05, 0, .05);
* solver s on e: p_cold = b_e + skill_s (skill 0, .05, .10, .15), p_hint = p_cold + L_es with
  L_es = delta + u_e + v_es, u_e ~ U(-.1, .1) shared by the solvers of e, v_es ~ U(-.05, .05);
* ``seeds`` paired seeds per (e, s): y_cold ~ Bernoulli(p_cold), y_hint ~ Bernoulli(p_hint).

So every pair's population lift is delta (0.2): every duel is null (both sides equal), every author's hint
score is delta, a solver's cold score is mean_a(E[b] + shift_a) + skill_s over the other authors, and an
author's design score (shift invariant) is disc(skills of its peers), its seed-noise-free value.
The warehouse goes through the product's own code paths: the dbt marts via the Dagster asset (``dbt build``
on a temporary DuckDB file), ``core.stats.pair_lift`` (the Python bootstrap) and ``core.rankings.leaderboard``.
Printed: coverage of every interval (share of intervals containing the truth), its mean width, the
false-decision rate of the null duels, the mean bias of the design score; n = intervals checked. Then the
tournament table (Bradley-Terry, zeta, cyclic triads, role rho) of ``benchmarks/calibration_tournament.py``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

DELTA = 0.2
SKILL = np.array([0.0, 0.05, 0.10, 0.15])
SHIFT = np.array([0.0, 0.05, 0.0, 0.05])
BASE = (0.05, 0.30)


def tournament(rng: np.random.Generator, group: int, envs: int, seeds: int,
               hint_shift: np.ndarray | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Episode rows of one 4-model tournament (models g###.m0..m3), and the true rates per (env, solver).
    ``hint_shift[a]`` is added to author a's lift (default none: every author's hints lift by DELTA)."""
    shift = np.zeros(4) if hint_shift is None else np.asarray(hint_shift, dtype=float)
    names = [f"g{group:03d}.m{i}" for i in range(4)]
    frames, truth = [], []
    for a, author in enumerate(names):
        base = rng.uniform(*BASE, envs) + SHIFT[a]
        u = rng.uniform(-0.1, 0.1, envs)
        for s, solver in enumerate(names):
            p_cold = base + SKILL[s]
            p_hint = np.clip(p_cold + DELTA + shift[a] + u + rng.uniform(-0.05, 0.05, envs), 0, 1)  # (never binds
            # at shift 0: the largest rate is 0.85)
            truth.append(pd.DataFrame({"env_id": [f"{author}.e{e:02d}" for e in range(envs)], "solver": solver,
                                       "true_cold": p_cold, "true_hint": p_hint}))
            cold = rng.random((envs, seeds)) < p_cold[:, None]
            hint = rng.random((envs, seeds)) < p_hint[:, None]
            env = np.repeat([f"{author}.e{e:02d}" for e in range(envs)], seeds)
            seed = np.tile(np.arange(seeds), envs)
            for cond, y in (("cold", cold), ("hinted", hint)):
                frames.append(pd.DataFrame({"env_id": env, "author": author, "solver": solver, "condition": cond,
                                            "seed": seed, "status": np.where(y.ravel(), "success", "failure")}))
    return pd.concat(frames, ignore_index=True), pd.concat(truth, ignore_index=True)


def truths(names: list[str]) -> dict[str, dict[str, float]]:
    """Population values of every published figure of one tournament."""
    from envduels_dagster.core.stats import discrimination

    mean_base = np.mean(BASE)
    solver = {m: float(np.mean([mean_base + SHIFT[a] for a in range(4) if a != s]) + SKILL[s])
              for s, m in enumerate(names)}
    design = {m: discrimination(np.delete(SKILL, a)) for a, m in enumerate(names)}
    squared = {}
    for a, m in enumerate(names):
        p = np.delete(SKILL, a)
        squared[m] = float((len(p) * (p ** 2).sum() - p.sum() ** 2) / (len(p) ** 2 // 4))
    return {"solver_score": solver, "solver_hinted": {m: v + DELTA for m, v in solver.items()},
            "author_score": {m: DELTA for m in names}, "design_score": design, "design_score_corrected": squared}


def admission_rows(envs: int, stats: pd.DataFrame, true_rates: pd.DataFrame) -> list[dict]:
    """Training admission on every peer (environment, solver): the fixed rule vs the posterior probabilities.

    Truly learnable: true cold rate <= 0.25 and true hinted rate >= 0.5 (the posterior's definition).
    The joint model's prior is fitted as the product fits it, over every learner of one warehouse (here a
    4-model tournament: 3 * 4 * envs rows), and, for comparison, over one learner's rows alone."""
    from envduels_dagster.core.stats import admits, learnable_probability
    from envduels_dagster.core.stats.admission import fit_beta_prior
    from envduels_dagster.core.stats.joint_admission import (
        fit_joint_prior,
        joint_learnable_probability,
        joint_lift_interval,
    )

    s = stats[~stats["is_self_pair"]].merge(true_rates, on=["env_id", "solver"]).reset_index(drop=True)
    truth = ((s["true_cold"] <= 0.25) & (s["true_hint"] >= 0.5)).to_numpy()
    n = s["n_seeds"].to_numpy(float)
    cold, hint = np.rint(s["p_cold"] * n).to_numpy(), np.rint(s["p_hint"] * n).to_numpy()
    jeffreys = learnable_probability(cold, hint, n)
    empirical, joint_group, joint_learner = (np.zeros(len(s)) for _ in range(3))
    lo, hi = np.zeros(len(s)), np.zeros(len(s))
    for solver in s["solver"].unique():
        m = (s["solver"] == solver).to_numpy()
        empirical[m] = learnable_probability(cold[m], hint[m], n[m], 0.25, 0.5, fit_beta_prior(cold[m], n[m]),
                                             fit_beta_prior(hint[m], n[m]))
        joint_learner[m] = joint_learnable_probability(fit_joint_prior(cold[m], hint[m], n[m]),
                                                       cold[m], hint[m], n[m])
    for group in s["solver"].str[:4].unique():
        m = (s["solver"].str[:4] == group).to_numpy()
        prior = fit_joint_prior(cold[m], hint[m], n[m])
        joint_group[m] = joint_learnable_probability(prior, cold[m], hint[m], n[m])
        lo[m], hi[m] = joint_lift_interval(prior, cold[m], hint[m], n[m])
    out = []
    for name, admitted, prob in (
            ("rule p_cold=0 & p_hint>=.5", admits(s["p_cold"].to_numpy(), s["p_hint"].to_numpy()), None),
            ("P>=.5 independent Jeffreys", jeffreys >= 0.5, jeffreys),
            ("P>=.5 independent empirical", empirical >= 0.5, empirical),
            ("P>=.5 joint, prior per learner", joint_learner >= 0.5, joint_learner),
            ("P>=.5 joint, prior per warehouse", joint_group >= 0.5, joint_group)):
        false = float((~truth[admitted]).mean()) if admitted.any() else float("nan")
        note = (f"admitted {int(admitted.sum())}/{int(truth.sum())} learnable, false {false:.3f}, "
                f"missed {float((~admitted[truth]).mean()) if truth.any() else float('nan'):.3f}")
        if prob is not None and admitted.any():
            note += f", expected false {float((1 - prob[admitted]).mean()):.3f}"
        if prob is not None:  # calibration over every row: predicted vs actual learnable share
            note += f"; all rows: mean P {prob.mean():.3f} vs learnable {truth.mean():.3f}"
        out.append({"envs": envs, "figure": f"admission: {name}", "path": "python", "n": len(s),
                    "reported": float("nan"), "coverage": float("nan"), "width": float("nan"), "note": note})
    true_lift = (s["true_hint"] - s["true_cold"]).to_numpy()
    ok = covered(lo, hi, true_lift)
    out.append({"envs": envs, "figure": "training row lift (joint posterior)", "path": "python", "n": len(s),
                "reported": 1.0, "coverage": float(ok.mean()), "width": float(np.mean(hi - lo)),
                "note": f"admitted rows only: {float(ok[joint_group >= 0.5].mean()) if (joint_group >= .5).any() else float('nan'):.3f}"})
    return out


def tournament_admission_rows(envs: int, episodes: pd.DataFrame, true_rates: pd.DataFrame,
                              thresholds=(0.5, 0.8)) -> list[dict]:
    """Expected vs realised false admissions of the product's training sets on the tournament warehouses.

    Through ``core.training.training_set.build_training_set`` itself (what the ``training_set`` asset runs): each
    4-model tournament is one warehouse (the joint prior is fitted on its peer rows), each model a learner.
    Expected = the sum of 1 - p_learnable over the admitted rows (the figure the asset's metadata reports);
    realised = admitted rows whose true rates are not learnable (true p_cold > cold_ceiling or true p_hint <
    min_hint), counted against the generator's truth."""
    from envduels_dagster.core.training.training_set import TrainingRule, build_training_set

    truth = true_rates.set_index(["env_id", "solver"])
    ids = episodes["env_id"].unique()
    env_table = pd.DataFrame({"env_id": ids, "author": [i.split(".e")[0] for i in ids], "domain": "synthetic",
                              "class_name": "Env", "max_turns": 6, "source_sha256": "0" * 64, "hint": "",
                              "benchmark_seeds": [list(range(4))] * len(ids), "valid": True, "parent_env_id": None})
    out = []
    for threshold in thresholds:
        rule = TrainingRule(threshold=threshold)
        admitted = expected = upper = false = learnable = considered = 0.0
        for _group, eps in episodes.groupby(episodes["author"].str[:4]):
            for learner in sorted(eps["solver"].unique()):
                ts = build_training_set(learner, eps, env_table, rule)
                rows = ts.rows
                t = truth.loc[[(e, learner) for e in rows["env_id"]]] if len(rows) else truth.iloc[:0]
                ok = (t["true_cold"] <= rule.cold_ceiling) & (t["true_hint"] >= rule.min_hint)
                admitted += len(rows)
                expected += ts.expected_false_admissions if len(rows) else 0.0
                upper += ts.false_admission_bound.upper if len(rows) else 0.0
                false += float((~ok).sum())
                peer = truth.xs(learner, level="solver")
                peer = peer[~peer.index.str.startswith(learner + ".")]
                learnable += float(((peer["true_cold"] <= rule.cold_ceiling)
                                    & (peer["true_hint"] >= rule.min_hint)).sum())
                considered += ts.considered
        note = (f"threshold {threshold}: admitted {int(admitted)} of {int(considered)} peer rows "
                f"({int(learnable)} truly learnable); false admissions expected {expected:.1f}, realised "
                f"{int(false)} (share {expected / max(admitted, 1):.3f} vs {false / max(admitted, 1):.3f}); "
                f"upper figure (least favourable region mass) {upper:.1f}")
        out.append({"envs": envs, "figure": f"training_set false admissions (P>={threshold})", "path": "python",
                    "n": int(admitted), "reported": float("nan"), "coverage": float("nan"), "width": float("nan"),
                    "note": note, "expected_false": expected, "realised_false": false, "upper_false": upper})
    return out


MIXTURE = (  # category share, p_cold range, p_hint range: learnable environments form a cluster here
    (0.3, (0.5, 1.0), (0.5, 1.0)), (0.3, (0.0, 0.1), (0.0, 0.2)), (0.3, (0.0, 0.2), (0.55, 1.0)),
    (0.1, (0.15, 0.35), (0.35, 0.65)))


def admission_mixture_rows(rows_per_warehouse: int, seeds: int, reps: int = 20) -> dict:
    """Admission on a generator where learnable (environment, learner) rows are a cluster, as in the simulation
    (wasted / noise / learnable / borderline), through core.training.training_set's estimator; one prior per warehouse."""
    from envduels_dagster.core.stats import admits
    from envduels_dagster.core.stats.joint_admission import (
        false_admission_bound,
        fit_joint_prior,
        joint_learnable_probability,
        joint_lift_interval,
    )

    tot = dict(admitted=0, false=0, expected=0.0, upper=0.0, rule=0, rule_false=0, learnable=0, covered=0, rows=0)
    for rep in range(reps):
        rng = np.random.default_rng(1000 * seeds + rep)
        k = rng.choice(len(MIXTURE), rows_per_warehouse, p=[m[0] for m in MIXTURE])
        pc = np.array([rng.uniform(*MIXTURE[i][1]) for i in k])
        ph = np.array([rng.uniform(*MIXTURE[i][2]) for i in k])
        ph = np.where(k == 0, np.maximum(ph, pc), ph)
        n = np.full(rows_per_warehouse, float(seeds))
        c, h = rng.binomial(seeds, pc).astype(float), rng.binomial(seeds, ph).astype(float)
        truth = (pc <= 0.25) & (ph >= 0.5)
        prior = fit_joint_prior(c, h, n)
        p = joint_learnable_probability(prior, c, h, n)
        lo, hi = joint_lift_interval(prior, c, h, n)
        a, rule = p >= 0.5, np.asarray(admits(c / n, h / n), dtype=bool)
        tot["upper"] += false_admission_bound(prior, (c, h, n), (c[a], h[a], n[a])).upper
        tot["admitted"] += int(a.sum()); tot["false"] += int((~truth[a]).sum()); tot["expected"] += float((1 - p[a]).sum())
        tot["rule"] += int(rule.sum()); tot["rule_false"] += int((~truth[rule]).sum()); tot["learnable"] += int(truth.sum())
        tot["covered"] += int(covered(lo, hi, ph - pc).sum()); tot["rows"] += rows_per_warehouse
    return tot


def build_warehouse(db: Path, episodes: pd.DataFrame) -> None:
    """Write the episodes and their environments, then run the dbt marts as the product does."""
    import dagster as dg
    import duckdb
    from dagster_duckdb import DuckDBResource

    from envduels_dagster.assets.marts.dbt import build_dbt_marts, dbt_resource
    from envduels_dagster.core.storage.warehouse import ensure_schema

    episodes = episodes.assign(is_self_pair=episodes["author"] == episodes["solver"], round=0)
    envs = episodes.drop_duplicates("env_id")[["env_id", "author"]].assign(
        round=0, domain="synthetic", family="synthetic", valid=True, source="class Env:\n    pass\n")
    names = sorted(set(episodes["author"]))
    registry = pd.DataFrame({"name": names, "model": [f"openai/{n}" for n in names]})
    with duckdb.connect(str(db)) as conn:
        ensure_schema(conn)
        for table, df in (("episodes", episodes), ("environments", envs), ("model_registry", registry)):
            conn.register("df", df)
            conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM df")
            conn.unregister("df")
    result = dg.materialize([build_dbt_marts()], instance=dg.DagsterInstance.ephemeral(),
                            resources={"dbt": dbt_resource(), "warehouse": DuckDBResource(database=str(db))},
                            run_config={"loggers": {"console": {"config": {"log_level": "ERROR"}}}},
                            raise_on_error=False)
    if not result.success:
        raise SystemExit(f"dbt marts failed on {db}")


def covered(lo, hi, truth) -> np.ndarray:
    lo, hi, truth = (np.asarray(x, dtype=float) for x in (lo, hi, truth))
    return (lo <= truth + 1e-12) & (truth <= hi + 1e-12)


def one_size(envs: int, groups: int, seeds: int, n_boot: int, workdir: Path, seed: int,
             rankings_only: bool = False) -> list[dict]:
    """Every calibration figure at ``envs`` environments per author (``rankings_only``: the rankings' alone,
    the same draws and marts, without the Python pair_lift bootstrap and the admission figures)."""
    import duckdb

    from envduels_dagster.core.rankings.leaderboard import (
        T_MIN_ENVS,
        RankingConfig,
        compute_rankings,
        withhold_uncalibrated_t,
    )
    from envduels_dagster.core.stats import pair_lift

    rng = np.random.default_rng(seed + envs)
    drawn = [tournament(rng, g, envs, seeds) for g in range(groups)]
    episodes = pd.concat([e for e, _ in drawn], ignore_index=True)
    true_rates = pd.concat([t for _, t in drawn], ignore_index=True)
    db = workdir / f"calibration-{envs}.duckdb"
    t0 = time.perf_counter()
    build_warehouse(db, episodes)
    t_dbt = time.perf_counter() - t0
    with duckdb.connect(str(db), read_only=True) as conn:
        sql_lift = conn.execute("SELECT * FROM pair_lift").df()
        duels = conn.execute("SELECT * FROM duels").df()
        stats = conn.execute("SELECT * FROM env_solver_stats").df()
    rows = []

    def add(figure: str, path: str, lo, hi, truth, extra: str = "") -> None:
        """Coverage over the intervals actually reported (NULL = "insufficient data" is not an interval)."""
        lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
        shown = ~(np.isnan(lo) | np.isnan(hi))
        ok = covered(lo, hi, np.broadcast_to(np.asarray(truth, dtype=float), lo.shape))[shown]
        rows.append({"envs": envs, "figure": figure, "path": path, "n": int(shown.size),
                     "reported": float(shown.mean()), "coverage": float(ok.mean()) if ok.size else float("nan"),
                     "width": float(np.mean(hi[shown] - lo[shown])) if ok.size else float("nan"), "note": extra})

    add("pair_lift t (lift_ci, published)", "dbt", sql_lift["lift_ci_lower"], sql_lift["lift_ci_upper"], DELTA)
    decided = (duels["outcome"] != "tie").to_numpy()
    add("duels lift_diff (null)", "dbt", duels["lift_diff_lower"], duels["lift_diff_upper"], 0.0,
        extra=f"decided {decided.mean():.3f} of {len(duels)}")
    if not rankings_only:
        py = pair_lift(episodes, n_boot=n_boot)
        add("pair_lift t (lift_ci, published)", "python", py["lift_ci_lower"], py["lift_ci_upper"], DELTA)
        # The diagnostic bootstrap as published (NULL below LIFT_BOOT_MIN_ENVS) and, to show why, as it would be
        # everywhere.
        add("pair_lift bootstrap (lift_boot, published)", "dbt", sql_lift["lift_boot_lower"],
            sql_lift["lift_boot_upper"], DELTA)
        raw = pair_lift(episodes, n_boot=n_boot, boot_min_envs=1)
        add("pair_lift bootstrap, not withheld", "python", raw["lift_boot_lower"], raw["lift_boot_upper"], DELTA)
        rows += admission_rows(envs, stats, true_rates)
        rows += tournament_admission_rows(envs, episodes, true_rates)
    per_fig: dict[str, list] = {}
    t1 = time.perf_counter()
    for g in range(groups):
        prefix = f"g{g:03d}."
        mine_stats = stats[stats["author"].str.startswith(prefix)]
        mine_duels = duels[duels["model_a"].str.startswith(prefix)]
        # every bootstrap interval measured, also where the product withholds it (rankings.BOOT_MIN_ENVS)
        table, summary = compute_rankings(mine_stats, mine_duels,
                                          RankingConfig(n_boot=n_boot, seed=g, withhold_uncalibrated=False))
        truth = truths(sorted(table["model"]))
        published = table.copy()  # the t intervals the product withholds below their minimum (T_MIN_ENVS)
        withhold_uncalibrated_t(published, mine_stats.groupby("author")["env_id"].nunique().to_dict())
        for fig, values in truth.items():
            t = table["model"].map(values)
            per_fig.setdefault(fig, []).append((table[f"{fig}_lower"], table[f"{fig}_upper"], t, table[fig]))
            if f"{fig}_ci_lower" in table:
                per_fig.setdefault(f"{fig} t (_ci)", []).append(
                    (table[f"{fig}_ci_lower"], table[f"{fig}_ci_upper"], t, table[fig]))
            if fig in T_MIN_ENVS:
                per_fig.setdefault(f"{fig} t (_ci, as published)", []).append(
                    (published[f"{fig}_ci_lower"], published[f"{fig}_ci_upper"], t, table[fig]))
        per_fig.setdefault("role_rho", []).append(summary[["role_p_value"]])
    t_rank = time.perf_counter() - t1
    for fig in ("solver_score", "solver_score t (_ci)", "solver_hinted", "author_score", "author_score t (_ci)",
                "design_score", "design_score_corrected", "design_score_corrected t (_ci)",
                "design_score_corrected t (_ci, as published)"):
        if fig not in per_fig:
            continue
        lo, hi, t, est = (pd.concat([x[i] for x in per_fig[fig]]) for i in range(4))
        add(fig, "python", lo, hi, t, extra=f"bias {float((est - t).mean()):+.3f}")
    p = pd.concat(per_fig["role_rho"])["role_p_value"]
    rows.append({"envs": envs, "figure": "role_rho p<0.05 (null)", "path": "python", "n": int(p.notna().sum()),
                 "reported": float("nan"), "coverage": float("nan"), "width": float("nan"),
                 "note": f"rejected {float((p < 0.05).mean()):.3f} (4 models: exact p >= 1/12)"})
    print(f"  {envs} envs/author: {len(episodes):,} episode rows, dbt {t_dbt:.1f}s, rankings {t_rank:.1f}s",
          flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", default=[3, 6, 12, 30])
    parser.add_argument("--groups", type=int, default=25, help="independent 4-model tournaments per size")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--admission-only", action="store_true", help="only the admission mixture table (fast)")
    parser.add_argument("--no-mixture", action="store_true", help="skip the admission mixture table")
    parser.add_argument("--training-set-only", action="store_true",
                        help="only the training_set admission of the tournament warehouses (no dbt; the same draws)")
    parser.add_argument("--no-tournament", action="store_true",
                        help="skip the tournament table (BT, zeta, triads, role rho: benchmarks/calibration_tournament.py)")
    parser.add_argument("--rankings-only", action="store_true",
                        help="only the dbt marts and the rankings' intervals (core.rankings.leaderboard.compute_rankings on the "
                             "same draws; no Python pair_lift bootstrap, no admission figures)")
    parser.add_argument("--tournament-groups", type=int, default=100, help="5-model warehouses per size")
    args = parser.parse_args()
    if args.training_set_only:
        from calibration_training import training_set_table

        return training_set_table(args)
    if not args.no_mixture:
        mixture_table()
    if args.admission_only:
        return 0
    return tournament_tables(args)


def mixture_table() -> None:
    print("admission on the mixture generator (20 warehouses each; P(learnable) >= 0.5, joint prior per warehouse):")
    for rows in (60, 200, 900):
        for seeds in (4, 8):
            t = admission_mixture_rows(rows, seeds)
            print(f"  {rows:4d} rows x {seeds} seeds: admitted {t['admitted']}, false share "
                  f"{t['false'] / max(t['admitted'], 1):.3f}, expected {t['expected'] / max(t['admitted'], 1):.3f} "
                  f"(upper {t['upper'] / max(t['admitted'], 1):.3f}); "
                  f"fixed rule admitted {t['rule']}, false share {t['rule_false'] / max(t['rule'], 1):.3f}; "
                  f"truly learnable {t['learnable']}; lift interval coverage {t['covered'] / t['rows']:.3f} "
                  f"(n = {t['rows']})", flush=True)


def tournament_tables(args) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="envduels-calibration-"))
    try:
        rows = [r for envs in args.envs for r in one_size(envs, args.groups, args.seeds, args.n_boot, workdir,
                                                          args.seed, args.rankings_only)]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    df = pd.DataFrame(rows)
    adm = df[df["figure"].str.startswith("training_set false admissions")]
    df = df.drop(index=adm.index, columns=["expected_false", "realised_false", "upper_false"], errors="ignore")
    # standard error of a coverage over the intervals reported (binomial; intervals of one tournament are
    # not independent, so it is a lower bound for the solver scores, which share environments)
    shown = (df["n"] * df["reported"]).round()
    df.insert(df.columns.get_loc("coverage") + 1, "se",
              np.sqrt(df["coverage"] * (1 - df["coverage"]) / shown.where(shown > 0)))
    if not adm.empty:
        print("\ntraining_set admission on the tournament warehouses (core.training.training_set.build_training_set, each "
              "tournament one warehouse, every model a learner; truth: true p_cold <= 0.25 and true p_hint >= 0.5):")
    for r in adm.itertuples(index=False):
        print(f"  {r.envs:2d} envs/author, {r.note}")
    print(f"\nnominal 95% intervals; {args.groups} tournaments of 4 models per size, {args.seeds} seeds; "
          f"goal: coverage >= 0.93, null duels decided <= 0.05")
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(df.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if not args.no_tournament:  # its own generator: the warehouse above has every duel null
        from calibration_tournament import run as tournament_run

        tour = tournament_run(args.envs, args.tournament_groups, args.seeds, args.n_boot, 400, args.seed)
        print(f"\ntournament intervals through compute_rankings; {args.tournament_groups} warehouses of 5 models "
              "per size (a planted cycle; truths: population tournament, design mean); goal: coverage >= 0.93")
        with pd.option_context("display.width", 200, "display.max_rows", 200):
            print(tour.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
