"""``envduels run --until-decided`` (issue 42): the real run, through Dagster on simulated models, in waves of
environments per author until every learner's answer is decided or the maximum size; it says why it stopped.
The rule's error rates are measured on synthetic tournaments (benchmarks/sequential_decision.py)."""

from __future__ import annotations

import re

import duckdb
import pytest

from tests.helpers.cli import home  # noqa: F401 - home is a fixture

REGISTRY = """models:
  - {name: oracle, model: envduels-sim/oracle, roles: [author], input_cost_per_mtok: 1, output_cost_per_mtok: 2}
  - {name: novice, model: envduels-sim/novice, roles: [author], input_cost_per_mtok: 1, output_cost_per_mtok: 2}
  - {name: apprentice, model: envduels-sim/apprentice, roles: [solver], input_cost_per_mtok: 1, output_cost_per_mtok: 2}
"""


def test_a_max_size_below_the_first_wave_is_refused_before_anything(home, capsys, tmp_path):  # noqa: F811
    from envduels_dagster.cli import main
    from envduels_dagster.core.storage.experiment_file import read

    registry = tmp_path / "models.yaml"
    registry.write_text(REGISTRY)
    assert main(["run", "--registry", str(registry), "--envs-per-author", "6", "--seeds", "2", "--rounds", "0",
                 "--yes", "--until-decided", "--max-envs", "4"]) == 2
    err = capsys.readouterr().err
    assert "--max-envs 4 is below the first wave's 6 environments per author" in err
    assert read(home) is None and not (home / "warehouse.duckdb").exists()


@pytest.mark.slow  # two waves of a real run through Dagster on simulated models
def test_the_run_adds_waves_until_decided_or_the_maximum_and_says_why_it_stopped(home, capsys, tmp_path):  # noqa: F811
    from envduels_dagster.cli import main

    registry = tmp_path / "models.yaml"
    registry.write_text(REGISTRY)
    code = main(["run", "--registry", str(registry), "--envs-per-author", "4", "--seeds", "2", "--rounds", "0",
                 "--yes", "--until-decided", "--wave", "4", "--max-envs", "8"])
    out = capsys.readouterr().out
    assert code == 0
    # the most it can cost, stated before the first wave's plan and question
    assert out.index("--until-decided: adds waves of environments per author") < out.index("envduels run: ")
    assert "up to 8 per author: at most about " in out
    assert "--until-decided: wave 1, 4 environments per author" in out
    stop = re.search(r"--until-decided stopped after (\d) wave\(s\) at (\d+) environments per author: (.+)", out)
    assert stop, out[-2000:]
    waves, size, reason = int(stop.group(1)), int(stop.group(2)), stop.group(3)
    assert reason in ("decided for every learner", "the maximum size was reached")
    assert (waves, size) == ((2, 8) if reason.startswith("the maximum") else (waves, 4 * waves))
    assert re.search(r"  apprentice: (pay (oracle|novice) \(p_best|not decided: )", out)
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as conn:
        written = dict(conn.execute("SELECT author, count(*) FROM environments WHERE round = 0 GROUP BY 1").fetchall())
        learners = conn.execute("SELECT DISTINCT learner FROM author_value").fetchall()
    assert written == {"oracle": size, "novice": size} and learners == [("apprentice",)]
