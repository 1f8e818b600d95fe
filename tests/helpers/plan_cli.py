"""``envduels plan`` in-process on a registry text (``plan_cli``), and ``ROLES``: three priced or unpriced authors and a
simulated learner."""

from __future__ import annotations

from envduels_dagster.cli import main

ROLES = """models:
  - name: a1
    model: envduels-sim/oracle
    roles: [author]
    input_cost_per_mtok: 3
    output_cost_per_mtok: 15
  - name: a2
    model: envduels-sim/expert
    roles: author
    input_cost_per_mtok: 1
    output_cost_per_mtok: 2
  - name: a3
    model: openai/some-open-model
    api_base: http://127.0.0.1:9/v1
    roles: [author]
  - name: learner
    model: envduels-sim/novice
    roles: [solver]
    input_cost_per_mtok: 0.1
    output_cost_per_mtok: 0.4
"""


def plan_cli(monkeypatch, capsys, tmp_path, registry_text: str, env: dict[str, str], *argv: str):
    path = tmp_path / "models.yaml"
    path.write_text(registry_text)
    monkeypatch.setenv("ENVDUELS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ENVDUELS_REGISTRY", str(path))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    code = main(["plan", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err
