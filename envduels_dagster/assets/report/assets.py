"""``experiment_report``: one self-contained HTML page answering "which author should I pay for my learner?".

Wiring only: read the warehouse (``core.report.experiment.read_inputs``), summarise each learner's training
set with the same rule the ``training_set`` asset uses (``core.training.training_set``), render
(``core.report.experiment.render``), write ``$ENVDUELS_HOME/reports/experiment/index.html`` and a page of
episodes per pair (``core.play.transcripts``), and put the answer first in the metadata with a link to the page.
"""

import re
from typing import Any

import dagster as dg
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.shared import OWNERS
from envduels_dagster.resources import DuelSettings, GatewayResource

ANSWER_COLUMNS = [("learner", "string", "The learner (solver) the training environments are for."),
                  ("author", "string", "The author ranked first for this learner in table author_value."),
                  ("basis", "string", "What the rank is by: per_usd (learnable environments per US dollar) or "
                                      "per_kcall (per 1000 authoring calls, when no author has a price)."),
                  ("value", "float", "The author's figure on that basis (rounded for display)."),
                  ("lower", "float", "95% interval, lower bound."), ("upper", "float", "95% interval, upper bound."),
                  ("rank_lower", "int", "95% rank interval, best rank."),
                  ("rank_upper", "int", "95% rank interval, worst rank."),
                  ("n_envs", "int", "Environment slots of this author in the learner's sample.")]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def report_dir():
    from envduels_dagster.settings.locations import envduels_home

    return envduels_home() / "reports" / "experiment"


def answers_table(ans) -> dg.TableMetadataValue:
    from envduels_dagster.core.stats.rounding import as_float

    records = []
    for a in ans.to_dict("records"):
        row = {}
        for name, kind, _ in ANSWER_COLUMNS:
            v = a.get(name)
            v = as_float(v) if kind in ("float", "int") else v
            row[name] = (None if v is None else int(v) if kind == "int" else round(v, 3)) if kind != "string" else v
        records.append(dg.TableRecord(row))
    schema = dg.TableSchema(columns=[dg.TableColumn(n, k, description=d) for n, k, d in ANSWER_COLUMNS])
    return dg.MetadataValue.table(records=records, schema=schema)


@dg.asset(
    deps=[dg.AssetKey("rankings"), dg.AssetKey("pair_lift"), dg.AssetKey("authoring_progress"),
          dg.AssetKey("lift_learning"),  # after the study's calls: the spend table sets the ledger beside the tables
          dg.AssetDep("author_value", partition_mapping=dg.AllPartitionMapping()),
          dg.AssetDep("training_set", partition_mapping=dg.AllPartitionMapping())],
    group_name="report", kinds={"python", "html"}, owners=OWNERS, tags={"layer": "product"}, code_version="1",
    description="The experiment report: one self-contained HTML page (no network, no script) at "
                "$ENVDUELS_HOME/reports/experiment/index.html (`envduels report` prints where). First the answer to "
                "\"which author should I pay for my learner?\" (author_value's top-ranked row per learner), then the "
                "leaderboard with rank and score intervals and counts, the hint-lift heatmap (author x solver, "
                "interval and n per cell), solver rank against author rank, author value per learner, the training "
                "sets with where the other candidates went, hardening rounds, what was spent, and a page of "
                "episodes per pair (cold and hinted side by side).",
)
def experiment_report(context: dg.AssetExecutionContext, warehouse: DuckDBResource,
                      settings: DuelSettings, gateway: GatewayResource) -> dg.MaterializeResult:
    from envduels_dagster.core.models.budget import ledger_path_for
    from envduels_dagster.core.play.transcripts import EPISODE_COLUMNS, episodes_html
    from envduels_dagster.core.report import experiment as rep
    from envduels_dagster.core.report.spend import read_ledger, read_pilot_costs
    from envduels_dagster.core.value.chart import value_sentence
    from envduels_dagster.settings.locations import envduels_home

    round_ = settings.rankings_round
    folder = report_dir()
    pages = folder / "episodes"
    pages.mkdir(parents=True, exist_ok=True)
    with warehouse.get_connection() as conn:
        inputs = rep.read_inputs(conn, round_)
        inputs.training = _training_summaries(conn, settings)
        pairs = conn.execute("SELECT DISTINCT author, solver FROM episodes ORDER BY 1, 2").fetchall() \
            if _has(conn, "episodes") else []
        for author, solver in pairs:  # every round's episodes of the pair on one page, round by round
            eps = conn.execute(f"SELECT {EPISODE_COLUMNS} FROM episodes WHERE author = ? AND solver = ? "
                               "ORDER BY round, env_id, seed, condition", [author, solver]).df()
            envs = conn.execute("SELECT env_id, hint FROM environments WHERE author = ?", [author]).df()
            name = f"{_safe(author)}__{_safe(solver)}.html"
            (pages / name).write_text(episodes_html(f"Episodes: {author} -> {solver} (every round)", envs, eps,
                                                    back="../index.html"))
            inputs.episode_pages[f"{author}|{solver}"] = f"episodes/{name}"
    inputs.pilot_costs = read_pilot_costs(envduels_home() / "plans" / "pilot.duckdb")
    cache = gateway.resolved().cache_path if hasattr(gateway, "resolved") else gateway.cache_path  # "": the home's
    inputs.ledger = read_ledger(ledger_path_for(cache, envduels_home()))
    html = rep.render(inputs)
    path = folder / "index.html"
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(html)
    tmp.replace(path)  # a reader never sees half a page
    ans = rep.answers(inputs.author_value) if len(inputs.author_value) else None
    lines = []
    if ans is not None:
        mix = inputs.author_value_mix
        lines = [value_sentence(inputs.author_value[inputs.author_value["learner"] == learner],
                                mix[mix["learner"] == learner] if len(mix) else mix, learner)
                 for learner in ans["learner"]]
    context.log.info(f"experiment report: {path}")
    metadata: dict[str, Any] = {**answer_entries(ans["learner"].tolist() if ans is not None else [], lines),
        "report": dg.MetadataValue.path(str(path)),
        "report_url": dg.MetadataValue.url(path.as_uri()),
        "episode_pages": len(inputs.episode_pages),
        "bytes": len(html.encode("utf-8")),
    }
    if ans is not None:
        metadata["answers"] = answers_table(ans)
    return dg.MaterializeResult(metadata=metadata)


MARKDOWN_LIMIT = 1000  # Dagster puts longer Markdown behind "[Show Markdown]" (issue 43: the answer was hidden)


def answer_entries(learners: list[str], lines: list[str]) -> dict[str, Any]:
    """The answer as metadata shown in place: one entry when it fits under Dagster's Markdown limit, else one
    entry per learner (``answer: LEARNER``), each cut to fit, the rest being in the report."""
    if not lines:
        return {"answer": dg.MetadataValue.md("author_value has not been materialized yet")}
    joined = "\n\n".join(lines)
    if len(joined) < MARKDOWN_LIMIT:
        return {"answer": dg.MetadataValue.md(joined)}
    cut = MARKDOWN_LIMIT - 60
    return {f"answer: {learner}": dg.MetadataValue.md(line if len(line) < MARKDOWN_LIMIT else
                                                      line[:cut].rsplit(" ", 1)[0] + " ... (the rest: in the report)")
            for learner, line in zip(learners, lines)}


def _has(conn, table: str) -> bool:
    return table in {t for (t,) in conn.execute("SHOW TABLES").fetchall()}


def _training_summaries(conn, settings: DuelSettings) -> dict[str, dict]:
    """Per learner: rows in table training_set, candidates, categories and the excluded candidates with why,
    from the rule the training_set asset applies (same settings, same episodes)."""
    from envduels_dagster.core.storage.warehouse import read_table
    from envduels_dagster.core.training.training_set import build_training_set

    if not (_has(conn, "episodes") and _has(conn, "training_set")):
        return {}
    envs = read_table(conn, "environments")
    episodes = conn.execute("SELECT env_id, author, solver, round, condition, seed, status FROM episodes").df()
    counts = dict(conn.execute("SELECT learner, count(*) FROM training_set GROUP BY learner").fetchall())
    rule = settings.training_rule()
    out = {}
    for learner in sorted(set(episodes["solver"])):
        built = build_training_set(learner, episodes, envs, rule)
        out[learner] = {"admitted": int(counts.get(learner, 0)), "rebuilt": len(built.rows),
                        "considered": built.considered, "categories": built.categories, "excluded": built.excluded}
    return out
