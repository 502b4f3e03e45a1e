# Stalwart: `make demo` and `make test` work on a fresh machine with only Python.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Parallel pytest workers: most tests wait on real masters, agents and tasks, so a 2-core machine
# runs three at once well (tests/conftest.py keeps each module on one worker).
PYTEST_WORKERS ?= 3

.PHONY: demo test checks lint typecheck pytest schema envs-check bench clean slurm-up slurm-down sshd ui ui-check

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[master,dev,dataframe,torch,deepspeed,notebook,tensorboard]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/stalwart config check examples/*/*.yaml
	$(BIN)/stalwart envs resolve examples/tensorflow/unpinned.yaml --context examples/tensorflow
	BIN=$(BIN) bash scripts/demo.sh

# The web UI (ui/: TypeScript, React, uPlot, built by Vite into src/stalwart/master/ui/static,
# which is committed: `make install` and `make demo` need no Node.js). `make ui` needs Node 20 and
# npm; `npm ci` runs again only when package-lock.json changed. See docs/contributing/ui.md.
UI_BUILD := src/stalwart/master/ui/static
UI_STAMP := ui/node_modules/.installed

$(UI_STAMP): ui/package-lock.json
	cd ui && npm ci --no-audit --no-fund
	touch $(UI_STAMP)

ui: $(UI_STAMP)
	cd ui && npm run --silent typecheck
	cd ui && npm run --silent lint
	cd ui && npm run --silent build

# Rebuild and compare with what git has: the shipped build must be the build of the source.
ui-check: ui
	@git diff --quiet -- $(UI_BUILD) && test -z "$$(git ls-files --others --exclude-standard -- $(UI_BUILD))" || { \
	  echo "ui-check: $(UI_BUILD) differs from the build of ui/ (rebuilt by 'make ui'):"; \
	  git status --short -- $(UI_BUILD); \
	  echo "Commit the rebuilt files (git add $(UI_BUILD)) with the change to ui/."; exit 1; }

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples scripts
	$(BIN)/ruff format --check src tests bench examples scripts

typecheck: $(STAMP)
	$(BIN)/mypy

# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE): the
# suite starts well over a thousand masters, agents, CLIs and tasks, and each would otherwise
# compile Stalwart's modules again (~0.2 s of CPU a master).
pytest: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=30

envs-check: $(STAMP)
	$(BIN)/stalwart envs check

# The quick checks run side by side (each prints its output as one block), then pytest runs all
# of tests/, including tests/compat (the official `det` CLI; its venv is cached in
# .cache/det-venv). CI=true turns a missing PostgreSQL or det venv into a failure.
CHECKS := lint typecheck envs-check ui-check

checks: $(STAMP)
	$(MAKE) --no-print-directory -j 4 --output-sync=target $(CHECKS)

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
