# Stalwart: `make demo` and `make test` work on a fresh machine with only Python.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest schema envs-check bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[master,dev,torch,deepspeed]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/stalwart config check examples/*/*.yaml
	$(BIN)/stalwart envs resolve examples/tensorflow/unpinned.yaml --context examples/tensorflow
	BIN=$(BIN) bash scripts/demo.sh

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest -q

envs-check: $(STAMP)
	$(BIN)/stalwart envs check

# pytest runs all of tests/, including tests/compat (the official `det` CLI; its venv is
# cached in .cache/det-venv). CI=true turns a missing PostgreSQL or det venv into a failure.
test: lint typecheck envs-check pytest

# Not part of `make test`: see docs/benchmarks.md.
bench: $(STAMP)
	$(BIN)/python -m bench run

schema: $(STAMP)
	$(BIN)/python -m stalwart.config.schema --write

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
