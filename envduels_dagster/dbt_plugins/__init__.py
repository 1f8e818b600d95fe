"""The dbt-duckdb plugins that ``dbt_project/profiles.yml`` names: ``warehouse`` attaches the warehouse file of
the embedded profile, ``ducklake`` loads the DuckLake extensions of the shared one from their wheels. dbt imports
them in its own process; nothing here runs at import time."""
