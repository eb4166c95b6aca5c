PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench

NODE_DIR := tests/node
NODE_STAMP := $(NODE_DIR)/node_modules/.installed

.PHONY: test test-fast demo lint typecheck install node bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The version is read from src/gcfkit/__init__.py at install time: reinstall when it changes.
$(STAMP): pyproject.toml src/gcfkit/__init__.py | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[test]"
	touch $(STAMP)

$(BENCH_STAMP): pyproject.toml src/gcfkit/__init__.py | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[test,bench]"
	touch $(BENCH_STAMP) $(STAMP)

install: $(STAMP)

# The Node MCP servers the HTTP tests run against (server-everything, the conformance suite
# and the Node 22 it needs), in a local node_modules; reinstalled only when package.json moves.
node: $(NODE_STAMP)

$(NODE_STAMP): $(NODE_DIR)/package.json
	@if command -v npm >/dev/null 2>&1; then \
		cd $(NODE_DIR) && npm install --no-package-lock --no-audit --no-fund --loglevel=error \
		&& touch node_modules/.installed; \
	else echo "npm not found: the tests against Node servers will be skipped"; fi

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck node
	$(BIN)/python -m pytest -q

# The inner loop: the same checks without the tests marked slow.
test-fast: lint typecheck
	$(BIN)/python -m pytest -q -m "not slow"

# Token report (bench/report.md and charts), speed against gcf-python, and the proxy
# comparison on the MCP corpus; peers come from the bench extra.
bench: $(BENCH_STAMP)
	$(BIN)/python bench/tokens.py
	$(BIN)/python bench/speed.py
	$(BIN)/python bench/proxy.py

demo: $(STAMP)
	$(BIN)/python examples/demo.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .mypy_cache .ruff_cache .pytest_cache
