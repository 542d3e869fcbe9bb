# Two commands on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: help venv tools demo test lint typecheck unit bench clean

help:
	@echo "make demo   - install and diagnose the bundled examples"
	@echo "make test   - install, lint, type-check and run the whole test suite"
	@echo "make bench  - cold-start, classification and storm benchmarks"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# Real services for the integration tests: Prometheus, promtool and Alertmanager from
# Debian, the Pub/Sub and Firestore emulators of the Google Cloud CLI (Java).
tools:
	bash tests/harness/ensure_tools.sh

demo: $(STAMP)
	$(BIN)/python examples/demo.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest -q

test: $(STAMP) tools lint typecheck unit

bench: $(STAMP)
	$(BIN)/python bench/bench.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
