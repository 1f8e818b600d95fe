"""EnvDuels on Dagster: models duel as authors and solvers of interactive environments.

Layout (docs/ARCHITECTURE.md): ``core/`` is the engine (no Dagster), ``sim/`` the simulated models (a provider
plugin); ``assets/``, ``resources/`` and ``definitions.py`` wire the engine into Dagster; ``cli/`` is the
``envduels`` command, ``instance/`` the plugins ``dagster.yaml`` names, ``settings/`` every ``ENVDUELS_*``
variable, ``dbt_plugins/`` what ``profiles.yml`` names; ``api.py`` and ``consumer.py`` are for readers of the
training sets.
"""

from os import path as _path

__version__ = "0.1.0"

# The module paths an existing dagster.yaml may still name (envduels_dagster.run_launcher, .run_coordinator,
# .instance_storage: the plugins moved into instance/, issue 47) are found in instance/legacy_paths/, searched
# after the package's own directory. One more directory on the search path, nothing imported or read here;
# docs/DECISIONS.md "The package root in rooms".
__path__.append(_path.join(_path.dirname(__file__), "instance", "legacy_paths"))
