# The two commands of the README: `make run` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint typecheck pytest bench bench-match bench-peers bench-deliver bench-day chaos demo clean

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

# The chaos suite of issue 14 (docs/chaos.md): SIGKILLs of workers, ingest, run and the scheduler leader,
# races and SMTP faults on SQLite and PostgreSQL, 30 kill trials on each; over an hour on 2 cores. Its fast
# subset is tests/test_chaos.py, part of `make test`.
chaos: $(VENV)/.installed-dev
	$(BIN)/python bench/chaos.py --db both

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
