# fleetplan: every target sets itself up (creates .venv on first use).
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 8000
HOST ?= 127.0.0.1
export FLEETPLAN_DATABASE_URL ?= sqlite:///./fleetplan.db

.PHONY: install run test lint typecheck format bench calibrate-defaults clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/fleetplan db upgrade
	$(BIN)/fleetplan serve --host $(HOST) --port $(PORT)

# PostgreSQL tests run when a server answers on 127.0.0.1:5432 (database `test`,
# trust auth) or FLEETPLAN_TEST_POSTGRES_URL points at one; otherwise they skip.
PG_DEFAULT_URL := postgresql+psycopg://postgres@127.0.0.1:5432/test

test: $(STAMP)
	@if [ -z "$$FLEETPLAN_TEST_POSTGRES_URL" ] && (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; then \
		export FLEETPLAN_TEST_POSTGRES_URL=$(PG_DEFAULT_URL); \
		echo "PostgreSQL answers on 127.0.0.1:5432: its tests run too"; fi; \
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy's settings (packages, pydantic plugin, strictness) are in pyproject.toml.
typecheck: $(STAMP)
	$(BIN)/mypy .   # the packages, and tests, scripts and bench too

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	@for f in bench/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

# Refit the shipped GPUs' efficiency defaults to catalog/measurements/reference.json
# and rewrite docs/calibration.md (scripts/calibrate_defaults.py; a few minutes), then the
# PCIe all-reduce and per-sequence decode cost fits that read those factors.
calibrate-defaults: $(STAMP)
	$(BIN)/python scripts/calibrate_defaults.py
	$(BIN)/python scripts/fit_pcie_allreduce.py --write
	$(BIN)/python scripts/fit_decode_sequence_cost.py --write

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache
