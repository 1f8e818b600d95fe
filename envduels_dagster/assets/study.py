"""``lift_learning``: does hint lift predict the gain from training? (simulated learners)."""

import asyncio

import dagster as dg
import pandas as pd
from dagster_duckdb import DuckDBResource

from envduels_dagster.assets.common import OWNERS, markdown_table
from envduels_dagster.core.authoring import author_messages, spec_from_reply
from envduels_dagster.core.models import run_and_close
from envduels_dagster.core.learning_study import COLUMNS, correlate, study_learner
from envduels_dagster.core.validation import validate_environment
from envduels_dagster.core.warehouse import read_table, replace_rows, specs_from_rows
from envduels_dagster.resources import DuelSettings, GatewayResource, SandboxResource


HELDOUT_BRIEF = "a held-out evaluation variant of your usual games"


async def heldout_environments(gw, author: str, count: int, seeds: list[int], limits):
    """Fresh environments by ``author`` for evaluation only: same slots as its benchmark ones, so the same
    kinds of game, but a different brief, so different instances that nobody trained on."""
    envs = []
    for slot in range(count):
        reply = await gw.chat(author, author_messages(slot, count, HELDOUT_BRIEF, seeds), seed=slot)
        spec = spec_from_reply(author, slot, reply.text, seeds)
        envs.append(await validate_environment(spec, limits) if spec.reject_reason is None else spec)
    return envs


@dg.asset(
    deps=["training_set", "pair_lift"], group_name="training", kinds={"python", "duckdb"}, owners=OWNERS,
    tags={"layer": "study"},
    description="Lift -> learning study: for each simulated learner and author, train the learner on that author's "
                "environments (settings.study_train_on: all valid ones, or only its training set), then compare cold success on the author's held-out environments before and "
                "after; correlate the gain with the author's hint lift on the learner (Spearman, permutation p).",
)
def lift_learning(context: dg.AssetExecutionContext, gateway: GatewayResource, sandbox: SandboxResource,
                  settings: DuelSettings, warehouse: DuckDBResource) -> dg.MaterializeResult:
    from envduels_dagster.sim.training import sim_trainer

    registry = gateway.registry()
    learners = [m.name for m in registry.models if m.is_simulated]
    skipped = [m.name for m in registry.models if not m.is_simulated]
    with warehouse.get_connection() as conn:
        envs = read_table(conn, "environments", {"round": 0})
        training = read_table(conn, "training_set")  # used when study_train_on == "training_set"
        lift = read_table(conn, "pair_lift")
    seeds = list(settings.benchmark_seeds)
    gw = gateway.gateway(registry)
    limits = sandbox.limits()

    async def run() -> pd.DataFrame:
        heldout = {a: await heldout_environments(gw, a, settings.study_heldout_envs, seeds, limits)
                   for a in registry.names}
        frames = []
        for learner in learners:
            if settings.study_train_on == "training_set":
                chosen = training[training["learner"] == learner]
            else:  # every valid environment of the author: what its hints can teach
                chosen = envs[envs["valid"] & (envs["author"] != learner)]
            train = {a: specs_from_rows(envs[envs["env_id"].isin(g["env_id"])]) for a, g in chosen.groupby("author")}
            lifts = {r.author: float(r.lift) for r in lift[lift["solver"] == learner].itertuples()}
            profile = registry.get(learner).model.split("/", 1)[1]
            frames.append(await study_learner(learner, gw, sim_trainer(profile), lifts, train, heldout, limits))
            context.log.info(f"lift->learning: studied {learner}")
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)

    df = asyncio.run(run_and_close(gw, run()))
    with warehouse.get_connection() as conn:
        replace_rows(conn, "lift_learning", df)
    rho, p, n = correlate(df)
    return dg.MaterializeResult(metadata={
        "num_rows": len(df),
        "spearman_lift_vs_gain": rho, "permutation_p": p, "n_pairs": n,
        "not_studied (no training backend for real models)": ", ".join(skipped) or "none",
        "rows": dg.MetadataValue.md(markdown_table(df)),
    })
