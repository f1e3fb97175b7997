# memgov-pg: the two commands are `make demo` and `make test`.
VENV   := .venv
BIN    := $(VENV)/bin
PYTEST ?= $(BIN)/python -m pytest

.PHONY: setup demo test test-fast bench lint up down clean

# pytest keeps each test module with its asserts rewritten in __pycache__ and reads it back
# while the source is unchanged; PYTHONDONTWRITEBYTECODE (set by some shells and images) stops
# that, and every pytest process (each xdist worker too) then rewrites ~200 modules again:
# 10 s of CPU per process on a 2-core machine. The targets below write the caches.
unexport PYTHONDONTWRITEBYTECODE

# scripts/setup installs what a target needs: `demo` PostgreSQL 15 + pg_cron,
# `test` also plpgsql_check (its tests are skipped when it cannot be installed).
setup:
	@scripts/setup test

## Set everything up, start the embedded cluster, migrate, deploy, run the demo.
demo:
	@scripts/setup demo
	@$(BIN)/memgov up >/dev/null
	@$(BIN)/memgov demo

## The whole test suite against a real PostgreSQL 15 with pg_cron.
test:
	@scripts/setup test
	$(PYTEST) $(PYTEST_ARGS)

## The edit loop: the tests that start no process, on two workers (each with its own cluster;
## a module stays on one worker). PYTEST_ARGS="-n 0" runs them in one process.
test-fast:
	@scripts/setup test
	$(PYTEST) -m "not slow" -n 2 --dist loadfile $(PYTEST_ARGS)

# The summary table of every measure of record; e.g. make bench BENCH_ARGS="--quick --out bench.md"
bench:
	@scripts/setup demo
	@scripts/bench $(BENCH_ARGS)

lint:
	@scripts/setup demo
	$(BIN)/ruff check memgov_pg tests alembic scripts
	$(BIN)/ruff format --check memgov_pg tests alembic
	$(BIN)/mypy memgov_pg

up:
	@scripts/setup demo
	@$(BIN)/memgov up

down:
	@$(BIN)/memgov down

clean:
	-$(BIN)/memgov down
	rm -rf $(VENV) .memgov dist build *.egg-info
