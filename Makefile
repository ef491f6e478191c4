# Every target is one command of the project's own CLI; `setup` runs first, so a fresh clone needs nothing else.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

VARIANT ?= dense
TASK ?=
SEED ?= 0
PROFILE ?= quick
DEVICE ?=
RUNS_DIR ?= runs
RESUME ?=
ARGS ?=

.PHONY: setup test lint list experiment bench-variants bench-train

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

test: setup
	$(BIN)/python -m pytest -q -n auto --durations=10

lint: setup
	$(BIN)/ruff check variants experiments analysis tests

list: setup
	$(BIN)/attnlab list

experiment: setup
ifdef RESUME
	$(BIN)/attnlab resume $(RESUME) --runs-dir $(RUNS_DIR) $(ARGS)
else
	$(BIN)/attnlab run --variant $(VARIANT) $(if $(TASK),--task $(TASK)) --seed $(SEED) --profile $(PROFILE) \
		$(if $(DEVICE),--device $(DEVICE)) --runs-dir $(RUNS_DIR) $(ARGS)
endif

bench-variants: setup
	$(BIN)/attnlab bench-variants $(ARGS)

bench-train: setup
	$(BIN)/attnlab bench-train $(ARGS)
