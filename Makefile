# The two commands of the README: `make run` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint typecheck pytest bench bench-match bench-peers bench-deliver bench-day bench-library demo clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(VENV)/.installed $@

run: $(VENV)/.installed
	mkdir -p data
	$(BIN)/papertrail run

demo: $(VENV)/.installed
	$(BIN)/papertrail demo

test: $(VENV)/.installed-dev lint typecheck pytest

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

pytest: $(VENV)/.installed-dev
	$(BIN)/pytest -q

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/ingest.py

bench-match: $(VENV)/.installed-dev
	$(BIN)/python bench/match.py

# The matcher against tantivy and SQLite FTS5 (bench/peers.py); tantivy comes with the `bench` extra.
bench-peers: $(VENV)/.installed-dev
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	$(BIN)/python bench/match.py --peers

bench-deliver: $(VENV)/.installed-dev
	$(BIN)/python bench/deliver.py

# The recorded day end to end (ingest, match, fan-out and planning, delivery with null notifiers) for 1,000
# subscribers of each population on SQLite and PostgreSQL; bench/day.py --help for larger sizes.
bench-day: $(VENV)/.installed-dev
	$(BIN)/python bench/day.py --sizes 1000

# The web pages at 10k stored versions on SQLite and PostgreSQL, a few minutes (issue 15); the stores are
# kept in /tmp/papertrail-bench-library. Larger: python bench/library.py --sizes 10000,1000000.
bench-library: $(VENV)/.installed-dev
	$(BIN)/python bench/library.py --sizes 10000

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
