# Two commands on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
CHECKOV_VERSION := 3.3.30

# Provider schemas for the offline schema check (tests/deploy/test_terraform_schema.py),
# extracted from prebuilt CDK bindings pinned (version and SHA-256) in
# infra/provider_schema.py; re-extracted when that file changes.
PROVIDER_SCHEMA_DIR := .provider-schema
PROVIDER_SCHEMA_STAMP := $(PROVIDER_SCHEMA_DIR)/.installed

.PHONY: help venv tools demo test lint typecheck unit bench bundle terraform provider-schema mutate clean

help:
	@echo "make demo   - install and diagnose the bundled examples"
	@echo "make test   - install, lint, type-check and run the whole test suite"
	@echo "make bench  - cold-start, classification and storm benchmarks"
	@echo "make bundle - build the Cloud Functions source bundle into build/bundle"
	@echo "make mutate - mutation testing of the safety modules (slow; not part of test)"

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

# checkov pins its own dependency tree: it lives in a venv of its own.
$(CHECKOV_STAMP):
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/pip install --quiet checkov==$(CHECKOV_VERSION)
	touch $(CHECKOV_STAMP)

# npm (google 6.x bindings) and pip (7.x/8.x) fetch them; only the extracted JSON is kept.
$(PROVIDER_SCHEMA_STAMP): infra/provider_schema.py | $(STAMP)
	rm -rf $(PROVIDER_SCHEMA_DIR)
	$(BIN)/python infra/provider_schema.py install $(PROVIDER_SCHEMA_DIR)
	touch $(PROVIDER_SCHEMA_STAMP)

provider-schema: $(PROVIDER_SCHEMA_STAMP)

# Offline checks of infra/terraform: formatting (when terraform is installed; it is not
# installed by this Makefile) and checkov; it also installs the provider schemas that the
# schema, wiring and bundle tests (pytest, in `unit`) check the module against.
terraform: $(CHECKOV_STAMP) $(PROVIDER_SCHEMA_STAMP)
	@if command -v terraform >/dev/null 2>&1; then \
		terraform fmt -check -recursive infra/terraform && echo "terraform fmt: ok"; \
	else echo "terraform fmt: not run (terraform is not installed)"; fi
	$(CHECKOV_VENV)/bin/checkov -d infra/terraform --framework terraform --quiet --compact --skip-download

bundle: $(STAMP)
	$(BIN)/python infra/bundle.py

test: $(STAMP) tools lint typecheck terraform unit

# Every benchmark runs; the target fails at the end if any of them missed its target.
bench: $(STAMP)
	@status=0; \
	$(BIN)/python bench/bench.py || status=1; \
	$(BIN)/python bench/bench_diagnose_memory.py || status=1; \
	$(BIN)/python bench/bench_replay_memory.py || status=1; \
	$(BIN)/python bench/bench_time_to_verdict.py || status=1; \
	LOOPBREAKER_HYPOTHESIS_PROFILE=long $(BIN)/python -m pytest -q -p no:cacheprovider \
		tests/hostile || status=1; \
	exit $$status

# Mutation testing of the approval, verification and remediation-safety modules (mutmut,
# configured in pyproject.toml [tool.mutmut]; tests/mutation/). Slow, so not in `test` or
# CI. Ends with killed / survived / equivalent per module and fails below 90% killed.
# About 20 minutes on 2 cores. MUTATE_ARGS=--survivors re-tests only what survived the last
# run; MUTATE_ARGS=--keep only what changed since it.
mutate: $(STAMP)
	$(BIN)/python tests/mutation/run.py $(MUTATE_ARGS)

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) $(PROVIDER_SCHEMA_DIR) build .pytest_cache .mypy_cache .ruff_cache .hypothesis
