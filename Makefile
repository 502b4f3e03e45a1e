# Stalwart: `make demo` and `make test` work on a fresh machine with only Python.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Parallel pytest workers: most tests wait on real masters, agents and tasks, so a 2-core machine
# runs three at once well (tests/conftest.py keeps each module on one worker).
PYTEST_WORKERS ?= 3

.PHONY: demo test checks lint typecheck pytest schema envs-check bench clean slurm-up slurm-down sshd

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[master,dev,torch,deepspeed,notebook,tensorboard]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/stalwart config check examples/*/*.yaml
	$(BIN)/stalwart envs resolve examples/tensorflow/unpinned.yaml --context examples/tensorflow
	BIN=$(BIN) bash scripts/demo.sh

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples scripts
	$(BIN)/ruff format --check src tests bench examples scripts

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=30

envs-check: $(STAMP)
	$(BIN)/stalwart envs check

# The quick checks run side by side (each prints its output as one block), then pytest runs all
# of tests/, including tests/compat (the official `det` CLI; its venv is cached in
# .cache/det-venv). CI=true turns a missing PostgreSQL or det venv into a failure.
CHECKS := lint typecheck envs-check

checks: $(STAMP)
	$(MAKE) --no-print-directory -j 3 --output-sync=target $(CHECKS)

test: checks
	$(MAKE) --no-print-directory pytest

# Not part of `make test`: see docs/benchmarks.md.
bench: $(STAMP)
	$(BIN)/python -m bench run

schema: $(STAMP)
	$(BIN)/python -m stalwart.config.schema --write

# A two-node Slurm on this machine (root; Debian packages slurm-wlm and munge; two slurmd
# daemons on localhost), with two fake GPUs per node. `make test` starts it by itself under
# CI=true (tests/slurm); see docs/contributing/slurm.md.
slurm-up:
	STALWART_SLURM_FAKE_GPUS=2 bash scripts/slurm/setup.sh

slurm-down:
	bash scripts/slurm/stop.sh

# Debian's openssh-server (and libnss-wrapper) for shell tasks, `python -m stalwart.tasks.shell`
# (root; idempotent). `make test` installs it by itself under CI=true (tests/tasks/test_shell.py);
# see docs/contributing/tasks-shell.md.
sshd:
	bash scripts/sshd/install.sh

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
