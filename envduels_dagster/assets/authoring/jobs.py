"""``author_job``: one model's authoring, the unit the sensor and the stale schedule launch."""

import dagster as dg

author_job = dg.define_asset_job(
    "author_job", selection=dg.AssetSelection.assets("authored_environments"),
    description="Author and validate one model's environments.")
