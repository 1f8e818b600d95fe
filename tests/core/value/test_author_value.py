"""author_value on hand-built warehouses: known costs and outcomes give known per-dollar figures and ranks."""

from __future__ import annotations

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest
from dagster_duckdb import DuckDBResource

from envduels_dagster.core.models.costing import list_cost
from envduels_dagster.core.stats.learnable import learnable_rows
from envduels_dagster.core.storage.warehouse import replace_rows
from envduels_dagster.core.value.author_value import RANKED, SELF, UNPRICED, ValueConfig, author_value
from envduels_dagster.core.value.chart import panel_scale, value_sentence, value_svg
from tests.helpers.value_warehouse import LEARNER, env_row, episode_rows, warehouse


def p_learnable(envs, eps) -> dict[str, float]:
    """The training set's P(learnable) of each environment for the learner: the one definition (issue 42)."""
    rows = learnable_rows(eps, envs, LEARNER).rows
    return dict(zip(rows["env_id"], rows["p_learnable"]))


def test_an_environment_counts_by_its_training_set_probability_not_by_its_rescued_seeds():
    """Before issue 42 a seed failed cold and passed hinted counted as learnable: (0 of 4 cold, 4 of 4 hinted)
    gave 0.9 whatever the other rows said; now it is P(true p_cold <= 0.25, true p_hint >= 0.5), the training
    set's p_learnable, and an environment passed cold on every seed is (nearly) never learnable."""
    envs, eps = warehouse()
    p = p_learnable(envs, eps)
    assert p["cheap.r0.0"] > 0.95 and p["cheap.r0.0"] == pytest.approx(p["pricey.r0.0"])  # the old figure: 0.9
    assert p["cheap.r0.3"] < 0.01


def test_a_model_without_a_price_costs_none_never_zero():
    assert list_cost(1000, 1000, 0.0, 0.0, response_cost_usd=0.0) is None
    assert list_cost(1000, 1000, 0.0, 0.0, response_cost_usd=0.002) == 0.002
    assert list_cost(1000, 1000, 0.0, 0.0, response_cost_usd=0.002, cached=True) is None
    assert list_cost(1_000_000, 500_000, 1.0, 4.0, cached=True) == pytest.approx(3.0)


def test_known_costs_and_outcomes_give_the_expected_per_dollar_figures_and_the_cheaper_better_author_first():
    envs, eps = warehouse()
    table, mix = author_value(envs, eps, LEARNER, ValueConfig(projection_budget_usd=10.0, n_boot=500))
    t = table.set_index("author")
    p = p_learnable(envs, eps)
    full, never = p["cheap.r0.0"], p["cheap.r0.3"]
    # cheap: P(learnable) full, full, full, never and 0 for the rejected slot, over 5 slots costing $0.05
    cheap = 3 * full + never
    assert t.loc["cheap", "expected_learnable"] == pytest.approx(cheap)
    assert t.loc["cheap", "per_env"] == pytest.approx(cheap / 5)
    assert t.loc["cheap", "per_usd"] == pytest.approx(cheap / 0.05)
    assert t.loc["cheap", "per_kcall"] == pytest.approx(1000 * cheap / 5)
    assert t.loc["cheap", "validity_rate"] == pytest.approx(0.8)
    assert t.loc["pricey", "per_env"] == pytest.approx(full)
    assert t.loc["pricey", "per_usd"] == pytest.approx(full / 0.1)
    # pricey writes better environments, cheap gives more per dollar: the cheaper author ranks first.
    assert t.loc["cheap", "rank"] == 1 and t.loc["pricey", "rank"] == 2
    assert t.loc["cheap", "rank_basis"] == "per_usd"
    assert t.loc["cheap", "p_best"] > 0.95 and t.loc["cheap", "rank_upper"] == 1
    ranked = table[table["status"] == RANKED]
    own = p["learner.r0.0"]
    for fig in ("per_env", "per_usd", "per_kcall"):  # ranked authors (4 and 5 slots) get intervals; the learner's
        assert (ranked[f"{fig}_lower"] < ranked[f"{fig}_upper"]).all()  # own 2 environments (below 4) none
        assert pd.isna(t.loc[LEARNER, f"{fig}_lower"]) and t.loc[LEARNER, fig] == pytest.approx(
            own * (1000 if fig == "per_kcall" else 1) / (0.001 if fig == "per_usd" else 1))
    assert t.loc["cheap", "per_usd_lower"] < cheap / 0.05 < t.loc["cheap", "per_usd_upper"]
    # the learner's own environments are reported, not ranked; its evaluation calls are apart
    assert t.loc[LEARNER, "status"] == SELF and pd.isna(t.loc[LEARNER, "rank"])
    assert t.loc["cheap", "eval_calls"] == 4 * 4 * 2 * 2 and t.loc["cheap", "author_calls"] == 5
    # the whole budget goes to cheap: $10 buys 1000 environment slots, 10 * per_usd expected learnable
    total = mix.set_index("author").loc["(total)"]
    assert mix["author"].tolist() == ["cheap", "(total)"]
    assert total["expected_learnable"] == pytest.approx(10 * cheap / 0.05)
    assert mix.set_index("author").loc["cheap", "envs_to_write"] == pytest.approx(1000.0)
    assert total["expected_lower"] <= 10 * cheap / 0.05 <= total["expected_upper"]


def test_when_cheap_is_not_cheap_the_better_writer_wins_and_a_share_cap_splits_the_budget():
    envs, eps = warehouse(cheap_cost=0.20)
    table, mix = author_value(envs, eps, LEARNER, ValueConfig(projection_budget_usd=10.0, max_share=0.5, n_boot=300))
    t = table.set_index("author")
    p = p_learnable(envs, eps)
    cheap = 3 * p["cheap.r0.0"] + p["cheap.r0.3"]
    assert t.loc["cheap", "per_usd"] == pytest.approx(cheap / 1.0)
    assert t.loc["pricey", "rank"] == 1 and t.loc["cheap", "rank"] == 2
    m = mix.set_index("author")
    assert m.loc["pricey", "share"] == pytest.approx(0.5) and m.loc["cheap", "share"] == pytest.approx(0.5)
    assert m.loc["(total)", "expected_learnable"] == pytest.approx(5 * p["pricey.r0.0"] / 0.1 + 5 * cheap)


def test_one_unpriced_author_is_listed_apart_and_the_priced_ones_stay_ranked_per_dollar():
    """Adding one model without a price must not switch the learner's ranking to per call (issue 32)."""
    envs, eps = warehouse(pricey_priced=False)
    table, mix = author_value(envs, eps, LEARNER, ValueConfig(n_boot=300))
    t = table.set_index("author")
    assert not t.loc["pricey", "priced"] and pd.isna(t.loc["pricey", "per_usd"])
    assert pd.isna(t.loc["pricey", "author_cost_usd"]) and "no price" in t.loc["pricey", "price_note"]
    assert (table["rank_basis"] == "per_usd").all()
    assert t.loc["cheap", "status"] == RANKED and t.loc["cheap", "rank"] == 1
    # pricey (1000 full per 1000 calls) would beat cheap per call; it is listed apart, with its per-call interval
    assert t.loc["pricey", "status"] == UNPRICED and pd.isna(t.loc["pricey", "rank"])
    full = p_learnable(envs, eps)["pricey.r0.0"]
    assert t.loc["pricey", "per_kcall"] == pytest.approx(1000 * full)
    assert t.loc["pricey", "per_kcall_lower"] <= t.loc["pricey", "per_kcall_upper"]
    assert mix["currency"].iloc[0] == "usd" and mix["author"].tolist() == ["cheap", "(total)"]
    line = value_sentence(table, mix, LEARNER)
    assert line.startswith(f"for {LEARNER} (ranked per dollar): pay cheap: p_best 1.00, the only ranked author; $")
    from envduels_dagster.core.stats.rounding import format_estimate

    shown = format_estimate(*t.loc["pricey", ["per_kcall", "per_kcall_lower", "per_kcall_upper"]])
    assert f"No price, listed apart (per 1000 calls): pricey {shown}, " in line


def test_when_no_candidate_has_a_price_authors_are_ranked_per_call_never_as_free():
    envs, eps = warehouse(pricey_priced=False)
    envs.loc[envs["author"] == "cheap", "author_cost_usd"] = None
    table, mix = author_value(envs, eps, LEARNER, ValueConfig(n_boot=300))
    t = table.set_index("author")
    assert (table["rank_basis"] == "per_kcall").all()
    assert t.loc["pricey", "rank"] == 1 and t.loc["cheap", "rank"] == 2  # 1000 full against 800 full + never
    assert mix["currency"].iloc[0] == "calls"
    assert "(ranked per call: no author has a price)" in value_sentence(table, mix, LEARNER)


def test_the_self_authored_row_never_sets_the_chart_scale():
    envs, eps = warehouse()
    table, _ = author_value(envs, eps, LEARNER, ValueConfig(n_boot=200))
    # the learner's own environments cost $0.001 each: 1000 full learnable per dollar, ten times any ranked author
    own = p_learnable(envs, eps)["learner.r0.0"]
    assert table.set_index("author").loc[LEARNER, "per_usd"] == pytest.approx(1000 * own)
    ranked_top = table.loc[table["status"] == RANKED, "per_usd_upper"].max()
    assert panel_scale(table, "per_usd") == pytest.approx(ranked_top)
    svg = value_svg(table, LEARNER)
    assert "(off the scale, not ranked)" in svg and svg.count('class="bar clipped"') == 1


def test_every_bar_and_whisker_stays_in_its_panel_and_the_value_sits_in_its_own_column():
    """Issue 43: the self-authored bar ran into the next panel and the value, written at the whisker's end, read as
    the upper bound. Each panel now ends where the next begins, with an axis, and values in a column of their own."""
    import xml.etree.ElementTree as ET

    envs, eps = warehouse()
    table, _ = author_value(envs, eps, LEARNER, ValueConfig(n_boot=200))
    root = ET.fromstring(value_svg(table, LEARNER))
    ns = "{http://www.w3.org/2000/svg}"
    axes = [float(g.find(f"{ns}line").get("x1")) for g in root.iter(f"{ns}g") if g.get("class") == "axis"]
    assert len(axes) == 3
    ends = [*axes[1:], float(root.get("width"))]
    def panel(x: float) -> int:
        return max(i for i, a in enumerate(axes) if x >= a - 0.01)
    for rect in (r for r in root.iter(f"{ns}rect") if (r.get("class") or "").startswith("bar")):
        x, w = float(rect.get("x")), float(rect.get("width"))
        assert x + w <= ends[panel(x)] - 58, (x, w)  # short of the value column
    for line in (ln for ln in root.iter(f"{ns}line") if ln.get("class") == "whisker"):
        x1, x2 = float(line.get("x1")), float(line.get("x2"))
        assert panel(x1) == panel(x2) and x2 <= ends[panel(x1)] - 58
    values = [t for t in root.iter(f"{ns}text") if t.get("class") == "value"]
    assert values and all(t.get("text-anchor") == "end" for t in values)
    assert {round(float(t.get("x")) - a) for t in values for a in axes if 0 < float(t.get("x")) - a < 270} == {262}
    caption = " ".join(t.text or "" for t in root.iter(f"{ns}text") if t.get("class") == "caption")
    assert "grey: self-authored" in caption and "yellow" not in caption  # only colours drawn are named
    assert "whiskers: 95% interval" in caption and "\u25b6: past the scale" in caption


def test_the_inline_chart_draws_text_bars_ranked_first_the_self_row_last_and_clipped():
    """The chart the Dagster UI shows in place (a metadata table): one row per author, a bar per panel whose
    cells follow the interval (solid to its lower bound, shades to the estimate and the upper bound)."""
    from envduels_dagster.core.value.chart import BAR_WIDTH, value_bars

    envs, eps = warehouse()
    table, _ = author_value(envs, eps, LEARNER, ValueConfig(n_boot=200))
    rows = value_bars(table)
    assert [r["author"] for r in rows] == [*table.sort_values("rank").dropna(subset=["rank"])["author"], LEARNER]
    assert rows[0]["rank"].startswith("#1 [") and rows[-1]["rank"] == SELF
    own = rows[-1]["per_usd"]
    assert own.startswith("\u2588" * BAR_WIDTH + "\u25b6") and own.endswith("(off scale)")  # 900 beside <= 90
    top = table.set_index("author").loc[rows[0]["author"]]
    bar = rows[0]["per_usd"][:BAR_WIDTH]
    assert len(bar) == BAR_WIDTH and bar.rstrip(" ").endswith("\u2591") or top["per_usd_upper"] == top["per_usd"]
    from envduels_dagster.core.stats.rounding import format_estimate

    # the figure beside the bar is rounded to what its interval justifies (56.0 [20.1, 89.6] reads 60 [20, 90])
    assert rows[0]["per_usd"].endswith(" " + format_estimate(top["per_usd"], top["per_usd_lower"], top["per_usd_upper"]))


def test_a_text_bar_at_its_edges():
    from envduels_dagster.core.value.chart import text_bar

    assert text_bar(0.5, 0.25, 0.75, 1.0, width=8) == "\u2588\u2588\u2593\u2593\u2591\u2591  "
    assert text_bar(0.5, None, None, 1.0, width=4) == "\u2593\u2593  "  # no interval: the estimate alone
    assert text_bar(0.0, 0.0, 0.0, 1.0, width=4) == "    "
    assert text_bar(2.0, 1.0, 3.0, 1.0, width=4) == "\u2588" * 4 + "\u25b6"
    assert text_bar(float("nan"), 0.1, 0.2, 1.0) == "" and text_bar(None, None, None, 1.0) == ""
    assert text_bar(0.5, 0.4, 0.6, 0.0) == ""  # no scale: nothing drawn


def test_too_few_environments_say_insufficient_data():
    import xml.etree.ElementTree as ET

    envs, eps = warehouse()
    table, mix = author_value(envs, eps, LEARNER, ValueConfig(min_envs=5, n_boot=200))
    t = table.set_index("author")
    labels = [e.text for e in ET.fromstring(value_svg(table, LEARNER)).iter("{http://www.w3.org/2000/svg}text")]
    assert "pricey (n<min, n=4)" in labels  # well-formed SVG: the "<" is escaped
    assert t.loc["pricey", "status"] == "insufficient data" and pd.isna(t.loc["pricey", "rank"])
    assert t.loc["cheap", "status"] == RANKED and t.loc["cheap", "rank"] == 1


def test_a_hardened_lineage_counts_once_with_its_newest_valid_version_and_all_its_calls():
    envs, eps = warehouse()
    child = env_row("pricey", 0, cost=0.10, round_=1, parent="pricey.r0.0")
    envs = pd.concat([envs, pd.DataFrame([child])], ignore_index=True)
    eps = pd.concat([eps, pd.DataFrame(episode_rows("pricey.r1.0", "pricey", 0))], ignore_index=True)
    t = author_value(envs, eps, LEARNER, ValueConfig(n_boot=200))[0].set_index("author")
    assert t.loc["pricey", "n_envs"] == 4 and t.loc["pricey", "n_written"] == 5
    p = p_learnable(envs, eps)  # the child (0 of 4 rescued: passes cold) replaces its parent
    assert "pricey.r0.0" not in p
    assert t.loc["pricey", "expected_learnable"] == pytest.approx(p["pricey.r0.1"] * 3 + p["pricey.r1.0"])
    assert t.loc["pricey", "per_usd"] == pytest.approx((p["pricey.r0.1"] * 3 + p["pricey.r1.0"]) / 0.5)


# ---------------------------------------------------------------- through Dagster on a real DuckDB file


def _write_warehouse(path, envs, eps):
    with duckdb.connect(str(path)) as conn:
        replace_rows(conn, "environments", envs)
        replace_rows(conn, "episodes", eps)


def _materialize(path, learners):
    from envduels_dagster.assets.value.assets import author_value as asset
    from envduels_dagster.assets.value.checks import author_value_checks
    from envduels_dagster.resources import AuthorValueSettings, DuelSettings

    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("solvers", learners)
    return dg.materialize([asset, author_value_checks], instance=instance, partition_key=LEARNER,
                          resources={"warehouse": DuckDBResource(database=str(path)), "settings": DuelSettings(),
                                     "value_settings": AuthorValueSettings(projection_budget_usd=10.0, n_boot=300)})


@pytest.mark.slow  # a few seconds or more (measured with --durations, loaded 2-core machine)
def test_the_asset_writes_the_tables_and_its_checks_pass_on_a_hand_built_warehouse(tmp_path):
    db = tmp_path / "w.duckdb"
    _write_warehouse(db, *warehouse())
    result = _materialize(db, [LEARNER, "cheap", "pricey"])
    assert result.success
    md = result.asset_materializations_for_node("author_value")[0].metadata
    # the decision first, its figures rounded to what the intervals justify (core.stats.rounding)
    answer = md["answer"].value
    assert answer.startswith("for learner (ranked per dollar): pay cheap: p_best ") and "runner-up pricey" in answer
    assert " per learnable environment, " in answer and "(n=5 environments by cheap)" in answer
    assert md["chart_image"].value.startswith("![author value for learner](data:image/svg+xml;base64,")
    chart = md["chart"]  # the inline chart: a metadata table of text bars, described
    assert isinstance(chart, dg.TableMetadataValue) and chart.records[0].data["rank"].startswith("#1 [")
    assert all(c.description for c in chart.schema.columns)
    assert md["rank_basis"].value == "per_usd"
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {"ranks_within_range": True, "intervals_ordered": True, "costs_non_negative": True,
                      "every_author_present": True}
    with duckdb.connect(str(db), read_only=True) as conn:
        ranks = dict(conn.execute("SELECT author, rank FROM author_value WHERE learner = ?", [LEARNER]).fetchall())
        total = conn.execute("SELECT expected_learnable FROM author_value_mix WHERE author = '(total)'").fetchone()
    assert ranks == {"cheap": 1, "pricey": 2, LEARNER: None}
    cheap = 3 * p_learnable(*warehouse())["cheap.r0.0"] + p_learnable(*warehouse())["cheap.r0.3"]
    assert total[0] == pytest.approx(10 * cheap / 0.05)


@pytest.mark.slow  # about a second or more (--durations, 1 Dec 2026): kept out of the inner loop
@pytest.mark.parametrize("corrupt, failing", [
    ("UPDATE author_value SET rank = 7 WHERE author = 'pricey'", "ranks_within_range"),
    ("UPDATE author_value SET per_usd_lower = per_usd_upper + 1 WHERE author = 'cheap'", "intervals_ordered"),
    ("UPDATE author_value SET per_env_upper = NULL WHERE author = 'cheap'", "intervals_ordered"),
    ("UPDATE author_value SET rank_lower = rank_upper + 1 WHERE author = 'cheap'", "ranks_within_range"),
    ("UPDATE author_value SET author_cost_usd = -1 WHERE author = 'cheap'", "costs_non_negative"),
    ("UPDATE author_value SET priced = FALSE, price_note = 'no price' WHERE author = 'cheap'", "costs_non_negative"),
    ("DELETE FROM author_value WHERE author = 'pricey'", "every_author_present"),
])
def test_the_checks_fail_on_bad_data(tmp_path, corrupt, failing):
    from envduels_dagster.assets.value.checks import evaluate_author_value

    db = tmp_path / "w.duckdb"
    _write_warehouse(db, *warehouse())
    assert _materialize(db, [LEARNER]).success
    with duckdb.connect(str(db)) as conn:
        conn.execute(corrupt)
        results = {r.check_name: r for r in evaluate_author_value(conn, LEARNER)}
    assert not results[failing].passed, results[failing].description
    assert [n for n, r in results.items() if not r.passed] == [failing]


def test_an_empty_warehouse_and_an_unplayed_author_give_insufficient_data_not_numbers():
    envs, eps = warehouse()
    table, mix = author_value(envs.iloc[0:0], eps.iloc[0:0], LEARNER, ValueConfig(n_boot=50))
    assert table.empty and mix.empty
    table, mix = author_value(envs, eps[eps["author"] != "pricey"], LEARNER, ValueConfig(n_boot=50))
    t = table.set_index("author")
    assert t.loc["pricey", "status"] == "insufficient data" and t.loc["pricey", "n_unplayed"] == 4
    assert pd.isna(t.loc["pricey", "per_env"]) and pd.isna(t.loc["pricey", "rank"])
    from envduels_dagster.core.value.chart import value_sentence, value_svg

    assert "pricey: insufficient data (n=0)" in value_sentence(table, mix, LEARNER)
    assert "no data" in value_svg(table, LEARNER)
    assert value_sentence(table.iloc[0:0], mix, LEARNER) == (
        "for learner: insufficient data (no environments written yet): every author needs 4 environments played by "
        "learner; `envduels plan --envs-per-author 4` prices it, `envduels run --envs-per-author 4` runs it (or "
        "`envduels run --until-decided` stops when decided; what is already written and played comes from the call "
        "cache)")


def test_authoring_records_calls_tokens_and_list_cost_per_environment_also_on_cache_hits(tmp_path):
    """Real simulated authoring through the gateway and its cache: a priced model's environments carry
    their cost, the same on a cached re-run (where the run spent nothing); an unpriced one's carry None."""
    import asyncio

    from envduels_dagster.core.authoring.prompts import author_environments
    from envduels_dagster.core.models import Gateway, run_and_close
    from envduels_dagster.core.models.call_cache import CallCache
    from envduels_dagster.core.models.registry import load_registry

    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - name: journeyman\n    model: envduels-sim/journeyman\n"
                    "    input_cost_per_mtok: 1.0\n    output_cost_per_mtok: 4.0\n"
                    "  - name: novice\n    model: envduels-sim/novice\n")
    registry = load_registry(path)

    def run():
        gw = Gateway(registry, CallCache(tmp_path / "calls.sqlite"))
        specs = {a: asyncio.run(run_and_close(gw, author_environments(gw, a, 2, [0, 1]))) for a in ("journeyman", "novice")}
        return specs, gw

    first, gw1 = run()
    again, gw2 = run()
    assert sum(gw2.stats.backend_calls.values()) == 0  # the second run is served by the cache
    for spec, cached in zip(first["journeyman"], again["journeyman"]):
        assert spec.author_calls == 1 and spec.author_prompt_tokens > 0 and spec.author_completion_tokens > 0
        expected = (spec.author_prompt_tokens * 1.0 + spec.author_completion_tokens * 4.0) / 1e6
        assert spec.author_cost_usd == pytest.approx(expected) and cached.author_cost_usd == pytest.approx(expected)
    assert all(s.author_cost_usd is None and s.author_calls == 1 for s in first["novice"] + again["novice"])


def test_hardening_records_each_childs_own_call_not_its_parents(tmp_path):
    """core.authoring.hardening.harden_author: a kept child is a copy of its parent, but its usage is the round's call."""
    import asyncio
    from types import SimpleNamespace

    from envduels_dagster.core.authoring.hardening import HardeningInputs, harden_author
    from envduels_dagster.core.models import ChatResponse
    from envduels_dagster.core.protocol import EnvironmentSpec

    parent = EnvironmentSpec(env_id="a.r0.0", author="a", class_name="C", max_turns=3, source="x", hint="h",
                             benchmark_seeds=[0], author_calls=1, author_prompt_tokens=999,
                             author_completion_tokens=999, author_cost_usd=5.0)

    class Gw:
        registry = SimpleNamespace(get=lambda name: SimpleNamespace(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0))

        async def chat(self, model, messages, seed=None, request=None):
            return ChatResponse(text='```json\n{"keep": true, "reason": "fine"}\n```', prompt_tokens=100,
                                completion_tokens=10)

    peers = pd.DataFrame(columns=["env_id", "solver", "condition", "seed", "status", "transcript"])
    (child,) = asyncio.run(harden_author(Gw(), "a", 1, HardeningInputs([parent], peers, []), 2000, None))
    assert child.parent_env_id == "a.r0.0" and child.author_meta.get("keep")
    assert (child.author_calls, child.author_prompt_tokens, child.author_completion_tokens) == (1, 100, 10)
    assert child.author_cost_usd == pytest.approx((100 * 1.0 + 10 * 2.0) / 1e6)


def test_intervals_are_plain_percentiles_not_widened_to_hold_the_estimate():
    """An estimate outside its replicates' 95% range stays outside: the interval is not forced around it."""
    from envduels_dagster.core.value.author_value import _interval

    replicates = np.linspace(0.2, 0.4, 1001)
    lo, hi = _interval(replicates, estimate=0.9)
    assert (lo, hi) == pytest.approx((0.205, 0.395)) and not lo <= 0.9 <= hi
    assert all(np.isnan(_interval(replicates, estimate=float("nan"))))
    assert all(np.isnan(_interval(np.array([np.nan, np.inf]), estimate=0.3)))


def test_the_resource_default_is_the_measured_minimum():
    """AuthorValueSettings (Dagster layer) restates core.value.author_value.MIN_ENVS so that loading the definitions
    does not import pandas; the two must not drift apart."""
    from envduels_dagster.core.value.author_value import MIN_ENVS
    from envduels_dagster.resources.value_settings import AuthorValueSettings

    assert AuthorValueSettings().min_envs == MIN_ENVS


def test_the_answer_for_the_ui_puts_each_clause_on_its_own_line_with_the_words_unchanged():
    """Issue 43: the Dagster UI showed the answer as one line cut at 1600 px; as Markdown with a hard break after
    each top-level '; ' it wraps, and no '; ' inside parentheses or brackets is broken."""
    from envduels_dagster.core.value.chart import answer_markdown

    line = ("for L (ranked per dollar): pay a: p_best 0.97, runner-up b (p_best 0.03; n=4); $0.2 [0.1, 0.4; x] per "
            "learnable environment; b 0.1, 0.2, 3 (rank 2 [1-2], n=4)")
    md = answer_markdown(line)
    assert md.split("  \n") == ["for L (ranked per dollar): pay a: p_best 0.97, runner-up b (p_best 0.03; n=4);",
                                "$0.2 [0.1, 0.4; x] per learnable environment;", "b 0.1, 0.2, 3 (rank 2 [1-2], n=4)"]
    assert md.replace("  \n", " ") == line
    assert answer_markdown("for L: insufficient data") == "for L: insufficient data"
