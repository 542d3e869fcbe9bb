# Two commands on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
APT_PACKAGES := prometheus prometheus-alertmanager

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
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@command -v gcloud >/dev/null || { echo "gcloud (Google Cloud CLI) is required for the emulators"; exit 1; }
	@command -v java >/dev/null || { echo "java is required for the Pub/Sub and Firestore emulators"; exit 1; }

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
