# Two entry points for a fresh machine: `make demo` and `make test` (see README).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch; on a CUDA machine: make demo TORCH=torch
TORCH ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: setup demo lint test test-all bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/vispriv demo

# The house rules (pyproject.toml [tool.ruff]); part of `make test`, so CI enforces them.
lint: setup
	$(BIN)/ruff check .

# pytest exits 5 when it collects no test: report it rather than fail the recipe.
# Tests run in parallel (pytest-xdist): TEST_WORKERS processes (default: the core count, at
# least 4), each with one OpenMP/torch thread, threads that sleep rather than spin while they
# wait (OMP_WAIT_POLICY=PASSIVE: the few tests that run two threads share the cores), and the
# tests of one module on one worker (--dist loadscope: a module's fixture, e.g. the Flower
# simulation, is built once). More workers than cores overlap the tests that wait on servers,
# processes and Ray. TEST_WORKERS=0 runs them in one process.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -lt 4 ] && n=4; echo $$n)
PARALLEL := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadscope)
THREADS := $(if $(filter 0,$(TEST_WORKERS)),,OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE)
# `make test`: the default tier (every test not marked slow); `make test-all`: everything, the
# long end-to-end runs (`@pytest.mark.slow`) included; CI runs test-all. Both print the 15
# slowest tests.
PYTEST := $(THREADS) $(BIN)/pytest -q --durations=15 $(PARALLEL)
NO_TESTS := rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 0; fi; exit $$rc
test: lint
	@$(PYTEST) -m "not slow"; $(NO_TESTS)

test-all: lint
	@$(PYTEST); $(NO_TESTS)

clean:
	rm -rf $(VENV) .vispriv-cache mlflow.db mlflow.db.lock mlflow.db.claims mlartifacts reports
