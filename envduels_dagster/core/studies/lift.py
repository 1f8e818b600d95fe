"""The lift -> learning study across learners: held-out authoring, what each learner trains on, the study.

Why here: which environments a learner trains on (every valid one of the author, or only
its training set), the held-out environments written for evaluation only, and the loop
over learners are the study's design; the ``lift_learning`` asset reads tables, calls
:func:`run_study`, writes. Trainers come from the caller (the simulated models provide
one per profile), so core never imports ``sim``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from envduels_dagster.core.authoring.prompts import PROMPT_VERSION, author_messages, spec_from_reply
from envduels_dagster.core.authoring.validation import validate_environment
from envduels_dagster.core.sandbox import SandboxLimits
from envduels_dagster.core.storage.warehouse import specs_from_rows
from envduels_dagster.core.studies.learning import COLUMNS, study_learner

HELDOUT_BRIEF = "a held-out evaluation variant of your usual games"
TRAIN_ON = ("all_valid", "training_set")


@dataclass(frozen=True)
class StudyConfig:
    """The study's design: whose held-out environments (``authors``, ``heldout_per_author`` each, on the
    benchmark ``seeds``, validated and played in a sandbox with ``limits``) and what each learner trains on
    (``train_on``: its training set, or every valid environment of the author)."""

    authors: tuple[str, ...]
    heldout_per_author: int
    seeds: tuple[int, ...]
    train_on: str = "all_valid"
    limits: SandboxLimits | None = None

    def __post_init__(self) -> None:
        if self.train_on not in TRAIN_ON:
            raise ValueError(f"train_on {self.train_on!r} is not one of {TRAIN_ON}")


@dataclass(frozen=True)
class StudyTables:
    """What the study reads: round 0 of table ``environments``, table ``training_set``, round 0 of ``pair_lift``."""

    envs: pd.DataFrame
    training: pd.DataFrame
    lift: pd.DataFrame


async def heldout_environments(gw, author: str, count: int, seeds: list[int], limits):
    """Fresh environments by ``author`` for evaluation only: same slots as its benchmark ones, so the same
    kinds of game, but a different brief, so different instances that nobody trained on."""
    envs = []
    for slot in range(count):
        reply = await gw.chat(author, author_messages(slot, count, HELDOUT_BRIEF, seeds), seed=slot)
        spec = spec_from_reply(author, slot, reply.text, seeds, prompt_version=PROMPT_VERSION)
        envs.append(await validate_environment(spec, limits) if spec.reject_reason is None else spec)
    return envs


def training_choice(learner: str, envs: pd.DataFrame, training: pd.DataFrame, train_on: str) -> dict[str, list]:
    """Per author, the environments ``learner`` trains on: its training set, or every valid peer environment."""
    if train_on == "training_set":
        chosen = training[training["learner"] == learner]
    else:  # every valid environment of the author: what its hints can teach
        chosen = envs[envs["valid"] & (envs["author"] != learner)]
    return {a: specs_from_rows(envs[envs["env_id"].isin(g["env_id"])]) for a, g in chosen.groupby("author")}


async def run_study(gw, learners: dict[str, Callable[[list], Any]], tables: StudyTables, config: StudyConfig,
                    on_learner: Callable[[str], None] | None = None) -> pd.DataFrame:
    """One row per (learner, author): gain on the author's held-out environments after training on its ones.

    ``learners`` maps each studied learner to its trainer; ``config`` is the study's design, ``tables`` what it reads.
    """
    if not learners:  # no learner can be trained (real models): the held-out environments would be paid for nothing
        return pd.DataFrame(columns=COLUMNS)
    seeds, limits = list(config.seeds), config.limits
    heldout = {a: await heldout_environments(gw, a, config.heldout_per_author, seeds, limits) for a in config.authors}
    frames = []
    lift = tables.lift
    for learner, trainer in learners.items():
        train = training_choice(learner, tables.envs, tables.training, config.train_on)
        lifts = {r.author: float(r.lift) for r in lift[lift["solver"] == learner].itertuples()}
        frames.append(await study_learner(learner, gw, trainer, lifts, train, heldout, limits))
        if on_learner:
            on_learner(learner)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
