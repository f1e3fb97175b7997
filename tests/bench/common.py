"""Shared pieces of the benchmarks: a server, a fresh migrated database, a timer.

A benchmark runs against ``--dsn`` (a superuser DSN of a scratch server) or
``MEMGOV_BENCH_DSN``, else against a throw-away local cluster started like the
test harness's. Every figure is a ratio against a baseline measured in the
same run, on the same rows.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from memgov_pg.cluster import LocalCluster, free_port
from memgov_pg.errors import MemgovError
from memgov_pg.migrate import upgrade


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--dsn", default=os.environ.get("MEMGOV_BENCH_DSN"), help="superuser DSN of a scratch server")
    p.add_argument("--repeat", type=int, default=int(os.environ.get("MEMGOV_BENCH_REPEAT", "3")),
                   help="runs per measurement; the best counts (default: MEMGOV_BENCH_REPEAT, else 3)")  # fmt: skip
    return p


@contextmanager
def bench_server(dsn: str | None) -> Iterator[str]:
    """A superuser DSN: ``dsn`` itself, else a throw-away durable local cluster's (stopped afterwards)."""
    if dsn is not None:
        yield dsn
        return
    base = Path(tempfile.mkdtemp(prefix="memgov-bench-"))
    # durable: fsync and synchronous_commit on, as a production server runs
    cluster = LocalCluster(base, free_port(), durable=True)
    try:
        cluster.init()
        cluster.start_on_a_free_port()
        cluster.bootstrap()
        yield cluster.dsn("postgres")
    except (MemgovError, psycopg.OperationalError) as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        sys.exit(1)
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


@contextmanager
def bench_database(dsn: str | None, name: str) -> Iterator[str]:
    """A fresh database migrated to head (on a throw-away cluster without ``dsn``); dropped afterwards."""
    with bench_server(dsn) as server:
        try:
            with psycopg.connect(server, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            params = psycopg.conninfo.conninfo_to_dict(server)
            params["dbname"] = name
            target = psycopg.conninfo.make_conninfo(**params)  # type: ignore[arg-type]
            upgrade(target)
        except (MemgovError, psycopg.OperationalError) as exc:
            print(f"bench: error: {exc}", file=sys.stderr)
            sys.exit(1)
        yield target
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


#: Stand-in bodies of memgov.enforce_write() (PL/pgSQL) for the floors of the write path:
#: the write trigger doing nothing, and doing nothing but log one constant decision
#: through the shipped memgov.log_decision().
EMPTY_TRIGGER = "BEGIN RETURN NEW; END"
LOG_ONLY_TRIGGER = (
    "BEGIN NEW.decision_id := memgov.log_decision('remember', NEW.memory_id, NEW.org_id, 'stand-in',"
    " ROW('allow', '{}', '{}', 'stand-in', 'enforce', true, NULL, NULL)::memgov.decision); RETURN NEW; END"
)


def enforce_write_header(conn: psycopg.Connection[Any]) -> str:
    """memgov.enforce_write()'s CREATE OR REPLACE header (signature, language, SECURITY DEFINER, SET clause)."""
    row = conn.execute(
        "SELECT split_part(pg_get_functiondef('memgov.enforce_write()'::regprocedure), 'AS $function$', 1)"
    ).fetchone()
    assert row is not None
    return str(row[0])


@contextmanager
def stand_in_trigger(conn: psycopg.Connection[Any], body: str) -> Iterator[None]:
    """memgov.enforce_write() with ``body`` for the block (the same trigger, rights and search_path), then restored."""
    row = conn.execute("SELECT pg_get_functiondef('memgov.enforce_write()'::regprocedure)").fetchone()
    assert row is not None
    conn.execute(f"{enforce_write_header(conn)} AS $stand_in$ {body} $stand_in$")
    try:
        yield
    finally:
        conn.execute(row[0])


def timings(repeat: int, run: Callable[[], Any], before: Callable[[], Any] | None = None) -> list[float]:
    """The seconds of each of ``repeat`` runs (``before`` runs untimed before each)."""
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return times


def best_of(repeat: int, run: Callable[[], Any], before: Callable[[], Any] | None = None) -> float:
    """The fastest of ``repeat`` runs, in seconds (``before`` runs untimed before each)."""
    return min(timings(repeat, run, before))


def median_of(repeat: int, run: Callable[[], Any]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows]
    return "\n".join([line, sep, *body])
