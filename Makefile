# memgov-pg: the two commands are `make demo` and `make test`.
VENV   := .venv
BIN    := $(VENV)/bin
PYTEST ?= $(BIN)/python -m pytest

.PHONY: setup demo test test-fast bench lint up down clean

setup:
	@scripts/setup

## Set everything up, start the embedded cluster, migrate, deploy, run the demo.
demo: setup
	@$(BIN)/memgov up >/dev/null
	@$(BIN)/memgov demo

## The whole test suite against a real PostgreSQL 15 with pg_cron.
test: setup
	$(PYTEST) $(PYTEST_ARGS)

test-fast: setup
	$(PYTEST) -m "not slow" $(PYTEST_ARGS)

bench: setup
	@scripts/bench

lint: setup
	$(BIN)/ruff check memgov_pg tests alembic scripts
	$(BIN)/ruff format --check memgov_pg tests alembic
	$(BIN)/mypy memgov_pg

up: setup
	@$(BIN)/memgov up

down:
	@$(BIN)/memgov down

clean:
	-$(BIN)/memgov down
	rm -rf $(VENV) .memgov dist build *.egg-info
