# Stalwart: `make demo` and `make test` work on a fresh machine with only Python.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest schema envs-check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[master,dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/stalwart config check examples/*/*.yaml
	$(BIN)/stalwart envs list
	$(BIN)/stalwart envs resolve examples/tensorflow/const.yaml --context examples/tensorflow
	$(BIN)/stalwart config show examples/core_api/adaptive.yaml

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest -q

envs-check: $(STAMP)
	$(BIN)/stalwart envs check

test: lint typecheck envs-check pytest

schema: $(STAMP)
	$(BIN)/python -m stalwart.config.schema --write

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
