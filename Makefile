# The two commands of the README: `make run` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test test-quick test-slow lint typecheck pytest pytest-slow bench bench-cli bench-match bench-peers bench-deliver bench-day bench-library chaos demo clean

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

# `make test`: lint, types and the fast suite (every behaviour, at small sizes) on every core; keep it
# under ~6 min on the 2-core machine (README, Testing: measured times).
# `make test-slow`: the full-size runs marked `slow` (3,000 digests over three workers, 120-example
# properties, the whole recorded feed through every parser variant); README, Testing.
test: $(VENV)/.installed-dev lint typecheck pytest

test-slow: $(VENV)/.installed-dev pytest-slow

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

# -n auto: one pytest worker per core (pytest-xdist); worksteal hands the long tests' neighbours to the
# idle worker. Each test has its own database (a fresh SQLite file or PostgreSQL schema) and ports.
PYTEST_PARALLEL ?= -n auto --dist worksteal
# Bytecode caching on even where the environment turns it off (PYTHONDONTWRITEBYTECODE=1): without it
# every pytest worker recompiles and re-rewrites every test module (~10 s of CPU to collect instead of ~4)
# and every `papertrail` process the tests start recompiles the project. __pycache__/ is git-ignored.
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/pytest

pytest: $(VENV)/.installed-dev
	$(PYTEST) -q $(PYTEST_PARALLEL) -m "not slow"

# `make test-quick`: the developer's inner loop, under a minute on the 2-core machine (README, Testing): the
# tests that touch no database and no network. tests/conftest.py marks `db` and `net` by the fixtures a
# test uses; PAPERTRAIL_TEST_QUICK=1 makes every connection and every SQLAlchemy engine fail, so a test
# that belongs in one of those marks but is missing it fails and says so.
test-quick: $(VENV)/.installed-dev
	PAPERTRAIL_TEST_QUICK=1 $(PYTEST) -q $(PYTEST_PARALLEL) -m "not slow and not db and not net"

pytest-slow: $(VENV)/.installed-dev
	$(PYTEST) -q $(PYTEST_PARALLEL) -m slow

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/ingest.py

# The start-up of each command against `python -c "import typer"` (docs/benchmarks.md).
bench-cli: $(VENV)/.installed-dev
	$(BIN)/python bench/cli.py

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

# The chaos suite (docs/chaos.md): SIGKILLs of workers, ingest, run and the scheduler leader,
# races and SMTP faults on SQLite and PostgreSQL, 30 kill trials on each; over an hour on 2 cores. Its fast
# subset is tests/test_chaos.py, part of `make test`.
chaos: $(VENV)/.installed-dev
	$(BIN)/python bench/chaos.py --db both

# The web pages at 10k stored versions on SQLite and PostgreSQL, a few minutes; the stores are
# kept in /tmp/papertrail-bench-library. Larger: python bench/library.py --sizes 10000,1000000.
bench-library: $(VENV)/.installed-dev
	$(BIN)/python bench/library.py --sizes 10000

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
