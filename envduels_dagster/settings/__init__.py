"""Settings: every ``ENVDUELS_*`` variable and its check (``variables.py``), where state lives
(``locations.py``) and the experiment's stored sizes (``experiment.py``). The engine (``core/``) never imports
this package: the Dagster layer and the command line read a setting here and pass the value in."""
