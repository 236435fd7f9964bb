# asyncrecall — every target CI and people call. `make help` lists them.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The coding agents whose hooks the tests drive in their real CLIs, from npm.
QWEN_CODE := 0.24.4
CLAUDE_CODE := 2.1.328
NPM_DIR := $(VENV)/npm
QWEN_CLI := $(NPM_DIR)/node_modules/.bin/qwen
CLAUDE_CLI := $(NPM_DIR)/node_modules/.bin/claude
AGENT_CLIS := $(NPM_DIR)/.installed-qwen-$(QWEN_CODE)-claude-$(CLAUDE_CODE)

.DEFAULT_GOAL := help
.PHONY: help install test coverage test-py313 test-windows test-long test-interop lint docs demo bench clean

help: ## Show this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-10s %s\n", $$1, $$2}'

# The benchmarks (`asyncrecall bench`) and the conformance kit are distributions of their
# own, beside the package; installed editable with it, so the suite runs their tests.
LOCAL_DISTS := -e ./benchmarks -e ./conformance
DIST_FILES := pyproject.toml benchmarks/pyproject.toml conformance/pyproject.toml

# The `local` extra (embedded models) compiles llama.cpp on a fresh machine: minutes,
# once; pip caches the built wheel after that. Its multimodal library (mtmd, which
# llama-cpp-python loads only for image chat handlers) is left out of the build.
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF

$(STAMP): $(DIST_FILES)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@echo "installing asyncrecall with its dev, docs, local, interop, postgres, framework, mcp, otel and console extras, the benchmarks and the conformance kit (a fresh machine compiles llama.cpp: ~5 min)"
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS) $$CMAKE_ARGS" $(BIN)/pip install --quiet \
	  -e '.[dev,docs,local,interop,postgres,pydantic-ai,openai-agents,langchain,google-adk,claude-agent-sdk,mcp,otel,console]' $(LOCAL_DISTS)
	@touch $(STAMP)

install: $(STAMP) $(AGENT_CLIS) ## Create .venv: the package with every extra, the benchmarks, the conformance kit

# Qwen Code and Claude Code, from npm, for the hook tests in their real CLIs
# (tests/integrations/test_agent_hooks.py; without npm they skip, saying so, and the Claude
# Code tests fall back on the CLI the claude-agent-sdk wheel bundles).
$(AGENT_CLIS):
	@if command -v npm >/dev/null; then \
	  npm install --silent --no-audit --no-fund --prefix $(NPM_DIR) \
	    @qwen-code/qwen-code@$(QWEN_CODE) @anthropic-ai/claude-code@$(CLAUDE_CODE) && touch $@; \
	else echo "npm not found: the agents' hook tests will skip (install Node 20+)" >&2; fi

# The suite also runs on Python 3.13, the agent tests on eager-task-factory loops, in a
# second venv with the dev and postgres extras only: PY313_TESTS need no other (the
# `local` tests skip cleanly without it, and CI does not compile llama.cpp twice). To run
# more there, give the extras too (after `rm -r .venv-3.13`):
# `make test-py313 PY313_TESTS=tests PY313_EXTRAS=dev,postgres,mcp,...`.
# Missing 3.13: a loud skip on a workstation, an error under CI=true.
# The first candidate that really runs 3.13 (a pyenv shim may exist and still refuse).
PY313 ?= $(shell for p in $$(command -v python3.13) $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python3.13); do \
	$$p -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null && { echo $$p; break; }; done)
VENV313 := .venv-3.13
PY313_EXTRAS ?= dev,postgres
STAMP313 := $(VENV313)/.installed

$(STAMP313): $(DIST_FILES)
	$(PY313) -m venv $(VENV313)
	$(VENV313)/bin/pip install --quiet --upgrade pip
	$(VENV313)/bin/pip install --quiet -e '.[$(PY313_EXTRAS)]' $(LOCAL_DISTS)
	@touch $(STAMP313)

# The whole suite includes tests/test_platforms.py: the CLI and the library example on a
# simulated Windows interpreter (tests/simwin), which needs Linux; under CI=true elsewhere
# it is an error, not a skip.
# The main run has the local and interop extras: the real-server tests (tests/interop)
# must run there, not skip (on 3.13, without them, they skip).
# Both runs spread the tests over pytest-xdist workers (TEST_WORKERS, one more than the
# cores by default: many tests wait on scripted model delays and subprocesses, and a third
# worker on 2 cores took a quarter off the CLI, agent and prefetch suites' wall time;
# TEST_WORKERS=0 runs them in this one process). Each worker has its own
# LocalServer, PostgreSQL cluster and llama.cpp server (session fixtures).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
PARALLEL := -n $(TEST_WORKERS) --dist loadgroup
# On Python 3.13 the tests of what differs there, asyncio's task scheduling: the agent's
# tests on eager-task-factory loops (ASYNCRECALL_EAGER_TASKS=1), the prefetcher (its own
# tests pick eager and plain loops), cancellation, the model clients' streams and
# give-way tasks, recall off the loop, the extraction scheduler, the LocalServer. The
# rest (the CLI in subprocesses, the stores, the benchmarks, the framework adapters'
# real agent loops, the real-server and simulated-Windows tests) runs once, in the main
# run.
PY313_TESTS ?= tests/agent tests/prefetch tests/test_cancel.py tests/models tests/testing \
  tests/memory/test_recall.py tests/memory/test_cold_path.py tests/memory/selectors \
  tests/extract/test_scheduler.py tests/extract/test_extract.py tests/extract/test_flow.py \
  tests/extract/test_nothing_lost.py tests/extract/test_single_flight.py

# Coverage: `make test` gates the lines of the design's core (the prefetcher and the agent
# client) that its Python 3.13 run reaches, traced through sys.monitoring (cheap, where
# Python 3.11's line tracer is not: the main run traces nothing). `make coverage` measures the whole suite, branches and
# the CLI's subprocesses too, against pyproject.toml's gate.
CORE_COVERAGE_FLOOR ?= 85
CORE_COVERAGE_ENV := COVERAGE_CORE=sysmon ASYNCRECALL_COVERAGE_BRANCH=false ASYNCRECALL_COVERAGE_PATCH=execv
CORE_COVERAGE := --cov=asyncrecall.prefetch --cov=asyncrecall.agent --cov-report=term \
  --cov-fail-under=$(CORE_COVERAGE_FLOOR)
SUITE_ENV = ASYNCRECALL_QWEN_CLI=$$([ -x $(QWEN_CLI) ] && echo $(abspath $(QWEN_CLI))) \
  ASYNCRECALL_CLAUDE_CLI=$$([ -x $(CLAUDE_CLI) ] && echo $(abspath $(CLAUDE_CLI))) \
  ASYNCRECALL_REQUIRE_INTEROP=1

test: $(STAMP) $(AGENT_CLIS) ## Run the whole test suite, then the asyncio tests on Python 3.13 with the core's coverage
	$(SUITE_ENV) $(BIN)/python -m pytest $(PARALLEL) -q
	@$(MAKE) --no-print-directory test-py313

coverage: $(STAMP) $(AGENT_CLIS) ## The whole suite, with the CLI's subprocesses measured too
	$(SUITE_ENV) $(BIN)/python -m pytest $(PARALLEL) -q --cov --cov-report=term

test-py313: ## The asyncio tests on Python 3.13, eager task factory (skipped loudly without it; an error in CI)
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
	  echo "== the asyncio tests on $$($(VENV313)/bin/python --version), eager task factory ==" && \
	  ASYNCRECALL_EAGER_TASKS=1 $(CORE_COVERAGE_ENV) $(VENV313)/bin/python -m pytest $(PARALLEL) -q \
	    -p no:cacheprovider $(CORE_COVERAGE) $(PY313_TESTS); \
	fi

test-windows: $(STAMP) ## Only the simulated-Windows tests (no fcntl, getuid, fork, SIGHUP ...)
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_platforms.py

test-long: $(STAMP) ## The long runs in full: 10,000 prefetch interleavings, 2,000 memory-write runs, ten single-slot runs
	ASYNCRECALL_LONG_PROPERTY=1 $(BIN)/python -m pytest -q -p no:cacheprovider \
	  --timeout=0 tests/agent/test_interleavings.py tests/extract/test_nothing_lost_property.py \
	  tests/interop/test_single_slot.py

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
