"""Software-defined assets of the duel pipeline (DESIGN §5).

``ALL_ASSETS`` is what ``definitions.py`` loads; add new asset modules here.
"""

from envduels_dagster.assets.authoring import authored_environments
from envduels_dagster.assets.duels import duel_episodes
from envduels_dagster.assets.lift import pair_lift
from envduels_dagster.assets.registry import model_registry
from envduels_dagster.assets.training import training_set

ALL_ASSETS = [model_registry, authored_environments, duel_episodes, pair_lift, training_set]
