"""The sensors tick at the interval their settings name, under Dagster's daemon loop (issue 34).

Dagster's sensor daemon looks at each sensor once per loop (``MIN_INTERVAL_LOOP_TIME``, 5 s) and skips it
while less than its minimum interval has passed since its last tick, whose timestamp is taken a fraction of a
second into that loop. The check below is Dagster's own (``is_under_min_interval``); with the interval
declared as the setting, a 5 s setting skipped the loop 5 s later and ticked every 10 s.
"""

from __future__ import annotations

import time
import types

import pytest
from dagster._core.scheduler.instigation import SensorInstigatorData
from dagster._daemon.sensor import MIN_INTERVAL_LOOP_TIME, is_under_min_interval

from envduels_dagster.definitions import build_definitions

STAMP_OFFSET_S = 0.2  # how far into its loop the last tick was stamped (0.1-0.6 s in the benchmark's ticks)


def _skipped(min_interval: int, loops_since_last_tick: int) -> bool:
    last = time.time() - (loops_since_last_tick * MIN_INTERVAL_LOOP_TIME - STAMP_OFFSET_S)
    state = types.SimpleNamespace(instigator_data=SensorInstigatorData(last_tick_timestamp=last,
                                                                       last_tick_start_timestamp=last))
    return is_under_min_interval(state, types.SimpleNamespace(min_interval_seconds=min_interval))


@pytest.fixture
def sensors_with(monkeypatch):
    def build(seconds: int) -> dict[str, int]:
        monkeypatch.setenv("ENVDUELS_SENSOR_INTERVAL_S", str(seconds))
        monkeypatch.setenv("ENVDUELS_AUTOMATION_INTERVAL_S", str(seconds))
        build_definitions.cache_clear()
        repo = build_definitions().get_repository_def()
        return {s.name: s.minimum_interval_seconds for s in repo.sensor_defs}

    yield build
    build_definitions.cache_clear()  # the next caller builds from its own environment


@pytest.mark.parametrize(("setting", "loops"), [(5, 1), (10, 2), (30, 6), (2, 1)])
def test_the_loop_that_comes_at_the_interval_ticks_and_the_one_before_does_not(sensors_with, setting, loops):
    declared = sensors_with(setting)
    assert set(declared) == {"envduels_requests", "envduels_automation"}
    for name, min_interval in declared.items():
        assert not _skipped(min_interval, loops), f"{name} at {setting} s skips the loop {loops * 5} s after its tick"
        if loops > 1:
            assert _skipped(min_interval, loops - 1), f"{name} at {setting} s ticks a loop early"


def test_the_request_sensor_ticks_every_daemon_loop_by_default(sensors_with, monkeypatch):
    monkeypatch.delenv("ENVDUELS_SENSOR_INTERVAL_S", raising=False)
    build_definitions.cache_clear()
    repo = build_definitions().get_repository_def()
    assert not _skipped(repo.get_sensor_def("envduels_requests").minimum_interval_seconds, 1)
