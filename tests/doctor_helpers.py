"""Helpers of the `memgov doctor` tests (tests/db/test_doctor*.py): the module's logins and
database, doctor's findings as a superuser or a login.

Roles are cluster-wide and other test modules leave client logins behind, so the
module's database first gets the one step docs/security.md asks of every deployer
(REVOKE TEMPORARY ON DATABASE ... FROM PUBLIC); the test of TEMP through PUBLIC
grants it back for its own duration.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.cli_helpers import run_memgov

WRITER = "doctor_writer"  # an agent's login


DBA = "doctor_dba"  # a login with no memgov role


GONE = "doctor_gone"  # bound to a tenant, then dropped


ADMIN = "doctor_admin"  # an operator's login, in memgov_admin


Key = tuple[str, str, str, str]


def doctor(dsn: str, *args: str) -> tuple[int, dict[str, Any]]:
    result = run_memgov("doctor", "--dsn", dsn, "--json", *args)
    assert result.stderr == "", result.stderr
    assert result.returncode in (0, 1), result.stdout
    return result.returncode, json.loads(result.stdout)


def keys(report: dict[str, Any]) -> set[Key]:
    return {(f["check"], f["severity"], f["subject"], f["fix"]) for f in report["findings"]}


def signature(conn: psycopg.Connection[Any], name: str) -> str:
    """memgov.<name>(argument types) as doctor prints it (and GRANT takes it)."""
    conn.execute("SET search_path = pg_catalog")
    try:
        rows = conn.execute(
            "SELECT oid::regprocedure::text FROM pg_proc WHERE pronamespace = 'memgov'::regnamespace AND proname = %s",
            (name,),
        ).fetchall()
    finally:
        conn.execute("RESET search_path")
    assert len(rows) == 1, f"memgov.{name}: {rows}"
    return str(rows[0][0])


def drop_roles(conn: psycopg.Connection[Any]) -> None:
    for role in (WRITER, DBA, GONE, ADMIN):
        if conn.execute("SELECT FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is not None:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.fixture(scope="module")
def dsn(memgov_dsn: str, memgov_server: Any) -> Iterator[str]:
    """The module's database: hardened (no TEMP for PUBLIC), a writer login and a DBA login."""
    with psycopg.connect(memgov_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("REVOKE TEMPORARY ON DATABASE {} FROM PUBLIC").format(sql.Identifier(conn.info.dbname)))
        drop_roles(conn)
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE memgov_writer").format(sql.Identifier(WRITER)))
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(DBA)))
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE memgov_admin").format(sql.Identifier(ADMIN)))
    try:
        yield memgov_dsn
    finally:
        with psycopg.connect(memgov_dsn, autocommit=True) as conn:
            drop_roles(conn)


@pytest.fixture
def admin(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="module")
def baseline(dsn: str, memgov_server: Any) -> Iterator[set[Key]]:
    """What doctor says once the sweep is scheduled (clean: test_a_scheduled_database_is_clean);
    the sweep is unscheduled again after the module. (Only the tests that ask for it run the
    command: a module's fast tests start no process.)"""
    if memgov_server.has_pg_cron:
        scheduled = run_memgov("retention", "schedule", "--dsn", dsn)
        assert scheduled.returncode == 0, scheduled.stderr
    try:
        yield keys(doctor(dsn)[1])
    finally:
        if memgov_server.has_pg_cron:
            run_memgov("retention", "unschedule", "--dsn", dsn)
