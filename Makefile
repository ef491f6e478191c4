# Every target is one command of the project's own CLI; `setup` runs first, so a fresh clone needs nothing else.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ARGS ?=

.PHONY: setup test lint list bench-variants

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

test: setup
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check variants experiments analysis tests

list: setup
	$(BIN)/attnlab list

bench-variants: setup
	$(BIN)/attnlab bench-variants $(ARGS)
