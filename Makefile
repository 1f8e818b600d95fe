# The README's two commands: `make demo` and `make test`. Each creates .venv when
# it is missing and (re)installs the project when pyproject.toml changed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: install demo test ui clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,shared]'
	cd dbt_project && DBT_PROFILES_DIR=. DBT_SEND_ANONYMOUS_USAGE_STATS=false ../$(VENV)/bin/dbt parse --quiet
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/envduels demo

test: $(STAMP)
	$(PY) -m pytest -q

ui: $(STAMP)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/envduels ui

clean:
	rm -rf $(VENV) data
