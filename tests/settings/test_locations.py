"""Where state lives, read from the settings: the registry file a command or a run uses and ENVDUELS_HOME read
without creating it (issue 47: the engine used to resolve both itself; now it is given the file)."""

from __future__ import annotations

from envduels_dagster.core.models.registry import DEFAULT_REGISTRY
from envduels_dagster.core.storage.experiment_file import ExperimentSettings, write
from envduels_dagster.settings.locations import home_dir, registry_file


def test_the_registry_is_the_flag_then_the_variable_then_the_stored_one_then_models_yaml(envduels_home, tmp_path,
                                                                                          monkeypatch):
    monkeypatch.delenv("ENVDUELS_REGISTRY", raising=False)
    assert registry_file() == DEFAULT_REGISTRY and DEFAULT_REGISTRY.name == "models.yaml"
    envduels_home.mkdir()
    write(envduels_home, ExperimentSettings(4, 3, 0, str(tmp_path / "stored.yaml")), "test")
    assert registry_file() == tmp_path / "stored.yaml"
    monkeypatch.setenv("ENVDUELS_REGISTRY", str(tmp_path / "variable.yaml"))
    assert registry_file() == tmp_path / "variable.yaml"
    assert registry_file(tmp_path / "flag.yaml") == tmp_path / "flag.yaml"
    monkeypatch.setenv("ENVDUELS_REGISTRY", "  ")  # blank is unset, as for every variable of the table
    assert registry_file() == tmp_path / "stored.yaml"


def test_the_home_is_read_without_being_made(envduels_home, monkeypatch):
    assert home_dir() == envduels_home.resolve() and not envduels_home.exists()
    monkeypatch.delenv("ENVDUELS_HOME")
    assert home_dir().name == "data"
