"""Simulated models: the embedded, offline default (no network, no keys).

They author real environment source and play real environments from text
observations; lift and rankings emerge from that play, never from set outcomes.
"""

from envduels_dagster.sim.model import SimulatedModel
from envduels_dagster.sim.profiles import PROFILES, SimProfile, get_profile
from envduels_dagster.sim.provider import SIM_PREFIX

__all__ = ["PROFILES", "SIM_PREFIX", "SimProfile", "SimulatedModel", "get_profile"]
