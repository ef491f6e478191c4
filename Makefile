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
TRIALS ?= 20
STUDY ?=
WORKERS ?=
STORAGE ?=
CONFIRM ?=
OUT ?= reports
FILTER ?=
NAME ?=
SETTING ?= quick
SEEDS ?=
KEEP ?=
CONFIG ?=
# local: worker processes here; slurm: one SLURM job array of WORKERS tasks (docs/benchmark.md, On a cluster).
LAUNCHER ?=

# `--option VALUE` only when VARIABLE was given on make's command line, so that an experiment file (CONFIG=) keeps
# its own value and the command its default otherwise: $(call GIVEN,VARIABLE,--option).
GIVEN = $(if $(filter command line,$(origin $(1))),$(2) $($(1)))

.PHONY: setup test lint list experiment sweep benchmark benchmark-estimate report saturation calibration results reproduce speed speed-train \
	bench-variants bench-train gpu-check

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

test: setup
	$(BIN)/python -m pytest -q -n auto --dist worksteal --durations=10

lint: setup
	$(BIN)/ruff check common variants experiments analysis attnlab tests

list: setup
	$(BIN)/attnlab list

experiment: setup
ifdef RESUME
	$(BIN)/attnlab resume $(RESUME) --runs-dir $(RUNS_DIR) $(ARGS)
else
	$(BIN)/attnlab run $(call GIVEN,VARIANT,--variant) $(if $(TASK),--task $(TASK)) $(call GIVEN,SEED,--seed) \
		$(call GIVEN,PROFILE,--profile) $(if $(CONFIG),--config $(CONFIG)) $(if $(DEVICE),--device $(DEVICE)) \
		--runs-dir $(RUNS_DIR) $(ARGS)
endif

sweep: setup
	$(BIN)/attnlab sweep $(call GIVEN,VARIANT,--variant) $(if $(TASK),--task $(TASK)) $(call GIVEN,SEED,--seed) \
		$(call GIVEN,PROFILE,--profile) $(if $(CONFIG),--config $(CONFIG)) $(call GIVEN,TRIALS,--trials) \
		$(if $(STUDY),--study $(STUDY)) $(if $(WORKERS),--workers $(WORKERS)) \
		$(if $(STORAGE),--storage '$(STORAGE)') $(if $(CONFIRM),--confirm-seeds $(CONFIRM)) \
		$(if $(DEVICE),--device $(DEVICE)) $(if $(LAUNCHER),--launcher $(LAUNCHER)) --runs-dir $(RUNS_DIR) $(ARGS)

# The core set (the design card's seven) on the default suite unless VARIANT or TASK is given on the command line.
BENCHMARK = $(BIN)/attnlab benchmark $(call GIVEN,VARIANT,--variant) $(if $(CONFIG),--config $(CONFIG)) \
	$(if $(TASK),--task $(TASK)) $(if $(SEEDS),--seeds $(SEEDS)) $(call GIVEN,PROFILE,--profile) \
	$(if $(WORKERS),--workers $(WORKERS)) $(if $(STORAGE),--storage '$(STORAGE)') $(if $(NAME),--name $(NAME)) \
	$(if $(DEVICE),--device $(DEVICE)) $(if $(LAUNCHER),--launcher $(LAUNCHER)) --runs-dir $(RUNS_DIR) --out $(OUT) $(ARGS)

benchmark: setup
	$(BENCHMARK)

# How long the same benchmark (or what remains of it) will take here, measured; it trains nothing.
benchmark-estimate: setup
	$(BENCHMARK) --estimate

report: setup
	$(BIN)/attnlab report --runs-dir $(RUNS_DIR) --out $(OUT) $(if $(STUDY),--study $(STUDY)) \
		$(if $(FILTER),--filter '$(FILTER)') $(if $(NAME),--name $(NAME))

saturation: setup
	$(BIN)/attnlab saturation --setting $(SETTING) --runs-dir $(RUNS_DIR) $(if $(WORKERS),--workers $(WORKERS)) $(ARGS)

calibration: setup
	$(BIN)/attnlab calibration $(call GIVEN,VARIANT,--variant) $(if $(TASK),--task $(TASK)) \
		$(call GIVEN,PROFILE,--profile) $(call GIVEN,SEED,--seed) $(if $(CONFIG),--config $(CONFIG)) \
		$(if $(DEVICE),--device $(DEVICE)) $(if $(LAUNCHER),--launcher $(LAUNCHER)) --runs-dir $(RUNS_DIR) $(ARGS)

# docs/results.md, README.md's headline table and each benchmark of record's page, generated from the committed records
# (docs/calibration.csv, docs/records/); KEEP=NAME first keeps the settled benchmark NAME as a record.
results: setup
	$(BIN)/attnlab results $(if $(KEEP),--keep $(KEEP)) --runs-dir $(RUNS_DIR) --out $(OUT)

# Published claims beside attnlab's own measurement (every claim, or CLAIM=a,b); ARGS=--estimate trains nothing.
reproduce: setup
	$(BIN)/attnlab reproduce $(if $(CLAIM),--claim $(CLAIM)) $(if $(WORKERS),--workers $(WORKERS)) \
		$(if $(STORAGE),--storage '$(STORAGE)') $(if $(DEVICE),--device $(DEVICE)) $(if $(LAUNCHER),--launcher $(LAUNCHER)) \
		--runs-dir $(RUNS_DIR) --out $(OUT) $(ARGS)

speed: setup
	$(BIN)/attnlab speed $(ARGS)

speed-train: setup
	$(BIN)/attnlab speed-train $(ARGS)

# The old names of speed and speed-train, kept for a while.
bench-variants: speed
bench-train: speed-train

gpu-check: setup
	$(BIN)/attnlab gpu-check $(ARGS)

# LRA's five real-data tasks at LRA's published sizes and budgets (docs/lra.md), read from DATA (else $ATTNLAB_DATA);
# a data set that is not there is skipped with the sentence saying where it comes from. TASK=lra_pathx: Path-X.
.PHONY: lra data-check
lra: setup
	$(BIN)/attnlab run $(call GIVEN,VARIANT,--variant) --task $(or $(TASK),lra) --profile lra $(call GIVEN,SEED,--seed) \
		$(if $(DATA),--set task.data_dir=$(DATA)) $(if $(DEVICE),--device $(DEVICE)) --runs-dir $(RUNS_DIR) $(ARGS)

# Which LRA data sets DATA (else $ATTNLAB_DATA) holds: examples per split, lengths; encodes each once, trains nothing.
data-check: setup
	$(BIN)/attnlab data-check $(or $(DATA),$(ATTNLAB_DATA))
