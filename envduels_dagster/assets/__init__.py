"""Software-defined assets of the duel pipeline (DESIGN §5).

``ALL_ASSETS`` is what ``definitions.py`` loads; add new asset modules here.
"""

from envduels_dagster.assets.authoring import authored_environments
from envduels_dagster.assets.duels import duel_episodes
from envduels_dagster.assets.export import training_export
from envduels_dagster.assets.marts import dbt_marts
from envduels_dagster.assets.rankings import design_convergence, rankings
from envduels_dagster.assets.progress import authoring_progress
from envduels_dagster.assets.registry import model_registry
from envduels_dagster.assets.rounds import round_assets
from envduels_dagster.assets.study import lift_learning
from envduels_dagster.assets.training import training_set
from envduels_dagster.assets.value import author_value

ALL_ASSETS = [model_registry, authored_environments, duel_episodes, dbt_marts, rankings, design_convergence,
              training_set, training_export, *round_assets(duel_episodes), authoring_progress, lift_learning,
              author_value]
