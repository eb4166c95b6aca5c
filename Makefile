PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
# make test SPEEDUPS=optional accepts a machine where the C accelerator cannot be built.
SPEEDUPS ?= required
NODE_DIR := tests/node
NODE_STAMP := $(NODE_DIR)/node_modules/.installed

.PHONY: test test-fast demo lint typecheck install node bench clean speedups-check

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The version is read from src/gcfkit/__init__.py at install time: reinstall when it changes.
# The editable install also compiles src/gcfkit/_speedups.c next to the sources.
$(STAMP): pyproject.toml setup.py src/gcfkit/__init__.py src/gcfkit/_speedups.c src/gcfkit/_bpe.c src/gcfkit/_bpe_unicode.h | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[test]"
	touch $(STAMP)

$(BENCH_STAMP): pyproject.toml setup.py src/gcfkit/__init__.py src/gcfkit/_speedups.c src/gcfkit/_bpe.c src/gcfkit/_bpe_unicode.h | $(BIN)/python
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

speedups-check: $(STAMP)
	@if [ "$(SPEEDUPS)" = required ]; then \
	  $(BIN)/python -c "import gcfkit._speedups, gcfkit._bpe" || { \
	    echo "the C accelerator did not build: install gcc and the Python headers" \
	         "(or run make test SPEEDUPS=optional)" >&2; exit 1; }; fi

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples setup.py
	$(BIN)/ruff format --check src tests bench examples setup.py

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck node speedups-check
	$(BIN)/python -m pytest -q
	# The codec tests marked pure, again on the pure-Python codec (the marker's description).
	GCFKIT_PURE_PYTHON=1 $(BIN)/python -m pytest -q -p no:cacheprovider -m pure tests

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
	rm -f src/gcfkit/_speedups*.so src/gcfkit/_bpe*.so
