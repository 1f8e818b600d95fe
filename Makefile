# The README's two commands: `make demo` and `make test`. Each creates .venv when
# it is missing and (re)installs the project when pyproject.toml changed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: install demo test lint ui snapshot clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,shared]'
	# The dbt manifest the marts' assets are built from (loading the definitions never parses).
	cd dbt_project && DBT_PROFILES_DIR=. DBT_SEND_ANONYMOUS_USAGE_STATS=false ../$(VENV)/bin/envduels-dbt parse --quiet
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/envduels demo

# ruff (style, imports, bugbear) and mypy (types at the interfaces), as configured in pyproject.toml.
lint: $(STAMP)
	$(VENV)/bin/ruff check envduels_dagster tests benchmarks examples
	$(VENV)/bin/mypy

test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadscope --no-loadscope-reorder --durations=15

ui: $(STAMP)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/envduels ui

# After an intended change to assets, checks, jobs, sensors or schedules: rewrite the
# code-location snapshot that tests/assets/test_code_location.py compares against, then review the diff.
snapshot: $(STAMP)
	env -u ENVDUELS_ROUNDS -u ENVDUELS_STALE_CRON $(PY) tests/code_location.py --update

clean:
	rm -rf $(VENV) data
