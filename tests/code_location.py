"""A plain-data description of the code location, for the snapshot test (``test_code_location.py``).

Run as a script it prints that description as JSON (``python tests/code_location.py``); with
``--update`` it rewrites the committed snapshot (``make snapshot``).

Why a description and not a pickle: a refactor should show, in a reviewable diff of
``tests/snapshots/code_location.json``, exactly which asset, check, job, sensor or schedule
moved or changed. Update it with ``make snapshot`` after an intended change.
"""

from __future__ import annotations


def _partitions(pd) -> object:
    if pd is None:
        return None
    dims = getattr(pd, "partitions_defs", None)
    if dims:
        return {d.name: _partitions(d.partitions_def) for d in dims}
    return f"{type(pd).__name__}({getattr(pd, 'name', '')})"


def _condition(cond) -> str | None:
    """An automation condition as nested operator names, e.g. ``eager: AND(in_latest_time_window, SINCE(...))``."""
    if cond is None:
        return None
    children = list(getattr(cond, "children", []) or [])
    inner = f"{cond.name}({', '.join(_condition(c) for c in children)})" if children else cond.name
    return f"{cond.get_label()}: {inner}" if cond.get_label() else inner


def describe(defs) -> dict:
    graph = defs.resolve_asset_graph()
    assets = {}
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        if not node.is_materializable:
            continue
        assets[key.to_user_string()] = {
            "group": node.group_name,
            "partitions": _partitions(node.partitions_def),
            "deps": sorted(k.to_user_string() for k in node.parent_keys),
            "automation_condition": _condition(node.automation_condition),
            "kinds": sorted(node.kinds),
            "owners": list(node.owners),
            # dbt models: dagster-dbt's checksum of the SQL (it changes with every edit, so not spelled out here)
            "code_version": "dbt checksum" if "dbt" in node.kinds and node.code_version else node.code_version,
        }
        schema = (node.metadata or {}).get("dagster/column_schema")
        if schema is not None:  # the catalog's column descriptions (core/storage/column_docs.py, dbt schema.yml, export contract)
            assets[key.to_user_string()]["columns"] = {c.name: c.description or "" for c in schema.columns}
    checks = {}
    for key in sorted(graph.asset_check_keys, key=lambda k: k.to_user_string()):
        spec = graph.get_check_spec(key)
        checks[key.to_user_string()] = {"blocking": bool(spec.blocking),
                                        "partitions": _partitions(getattr(spec, "partitions_def", None))}
    repo = defs.get_repository_def()
    jobs = {j.name: sorted(k.to_user_string() for k in j.asset_layer.selected_asset_keys)
            for j in repo.get_all_jobs() if not j.name.startswith("__")}
    sensors = {s.name: {"status": str(s.default_status), "jobs": sorted(t.job_name for t in s.targets),
                        "interval": s.minimum_interval_seconds} for s in repo.sensor_defs}
    schedules = {s.name: {"cron": s.cron_schedule, "job": s.job_name, "status": str(s.default_status)}
                 for s in repo.schedule_defs}
    return {"assets": assets, "asset_checks": checks, "jobs": jobs, "sensors": sensors, "schedules": schedules,
            "resources": sorted(repo.get_top_level_resources())}


SNAPSHOT = __import__("pathlib").Path(__file__).with_name("snapshots") / "code_location.json"


def current() -> str:
    """The description of ``envduels_dagster.definitions.defs`` as stable JSON text."""
    import json

    from envduels_dagster.definitions import defs

    return json.dumps(describe(defs()), indent=1, sort_keys=True) + "\n"


if __name__ == "__main__":
    import sys

    text = current()
    if "--update" in sys.argv:
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(text)
        print(f"wrote {SNAPSHOT}")
    else:
        print(text, end="")
