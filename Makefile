# One-command tooling. Every target creates the virtual environment it needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install install-semantic run test package-check lint format bench bench-full bench-smoke bench-quality crash-test console-screenshots clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "governed-memory needs Python 3.11 or newer (set PYTHON=python3.11)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

# The semantic extra (docs/operations.md). torch goes first, pinned to the CPU build that
# pip finds on this machine: asked for by the extra alone, pip would take a CUDA build.
SEMANTIC_STAMP := $(VENV)/.semantic-stamp
$(SEMANTIC_STAMP): pyproject.toml $(STAMP)
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev,semantic]'
	@touch $(SEMANTIC_STAMP)

install-semantic: $(SEMANTIC_STAMP)

run: install
	$(BIN)/gmem serve --data-dir ./gmem-data

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Build the wheel and sdist, twine-check them, install the wheel alone in a clean virtual
# environment and run gmem --version, gmem demo and gmem serve from it (.ci/package-check).
package-check: install
	$(BIN)/python .ci/package-check

lint: install
	$(BIN)/ruff format --check src tests bench .ci/package-check
	$(BIN)/ruff check src tests bench .ci/package-check
	$(BIN)/mypy

format: install
	$(BIN)/ruff format src tests bench .ci/package-check
	$(BIN)/ruff check --fix src tests bench .ci/package-check

bench: install
	$(BIN)/python -m bench --preset quick

bench-full: install
	$(BIN)/python -m bench --preset full

bench-smoke: install
	$(BIN)/python -m bench --preset smoke --no-docs

# Retrieval quality on LoCoMo (SPEC §12): recall@k of the product and of two BM25 baselines
# in the same run, written into docs/benchmarks.md. LOCOMO names the data folder. SEMANTIC
# (auto, on or off) adds semantic recall, the product's and the prototype's: auto where the
# extra is installed (make install-semantic). COST=1 adds what semantic recall costs a
# search at 1k and 10k items.
LOCOMO ?= ../shared/data/locomo-dev
SEMANTIC ?= auto
bench-quality: install
	$(BIN)/python -m bench.quality $(LOCOMO) --docs --semantic $(SEMANTIC) $(if $(COST),--cost)

# kill -9 of the real `gmem serve` under load, CYCLES times (docs/reliability.md);
# SERVE_WORKERS=N serves with `--workers N` and kills the supervisor and its workers at once.
CYCLES ?= 5
SYNCHRONOUS ?= FULL
SERVE_WORKERS ?= 1
crash-test: install
	$(BIN)/python -m tests.reliability.crashloop --cycles $(CYCLES) --synchronous $(SYNCHRONOUS) --serve-workers $(SERVE_WORKERS)

# Retake the screenshots of docs/console.md in the browser tests (needs Debian's chromium).
console-screenshots: install
	GMEM_CONSOLE_SCREENSHOTS=1 $(BIN)/python -m pytest tests/console/test_screenshots.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
