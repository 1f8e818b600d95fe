"""The plugins' dotted paths before issue 47, for a ``dagster.yaml`` written then (``envduels_dagster/__init__.py``
puts this directory on the package's search path, so ``envduels_dagster.run_launcher`` is ``run_launcher.py``
here). Each module re-exports the class from its new home; ``instance/home.py`` rewrites the old paths of a home
it prepares. Do not add new modules here."""
