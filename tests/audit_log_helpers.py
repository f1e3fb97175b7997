"""Helpers of the decision log tests (tests/db/test_audit_log*.py): real logins, governed
writes, sealing and verifying, and the log's state to compare before and after an attempt.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from psycopg import conninfo, sql

from memgov_pg.compiler import compile_policy
from memgov_pg.policy import load_policy
from tests.clean_slate import fresh
from tests.waiting import wait_for

ORG = "acme"


POLICY = 'version: "1.0.0"\ndefaults: {on_policy_miss: allow}\nsources: {user_confirmed: ["*"]}\n'


LOG_TABLES = ("decision_log", "decision_log_seals", "decision_log_archives")


# -- logins, sessions, writes -------------------------------------------------------------


@pytest.fixture(scope="module")
def logins(memgov_dsn: str) -> Iterator[dict[str, str]]:
    """Login roles of this module: an administrator, two writers, a reviewer."""
    tag = f"{os.getpid()}_{secrets.token_hex(3)}"
    names = {kind: f"audit_{tag}_{kind}" for kind in ("admin", "writer", "writer2", "reviewer")}
    groups = {"admin": "memgov_admin", "writer": "memgov_writer", "writer2": "memgov_writer",
              "reviewer": "memgov_reviewer"}  # fmt: skip
    with psycopg.connect(memgov_dsn, autocommit=True) as su:
        for kind, name in names.items():
            su.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
                sql.Identifier(name), sql.Identifier(groups[kind])))  # fmt: skip
    yield names
    with psycopg.connect(memgov_dsn, autocommit=True) as su:
        for name in names.values():
            su.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
            su.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
            su.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def login_dsn(dsn: str, role: str) -> str:
    return conninfo.make_conninfo(dsn, user=role)


@contextmanager
def login(dsn: str, role: str, *, autocommit: bool = True) -> Iterator[psycopg.Connection[Any]]:
    """A connection as the login ``role`` (session_user is that login), acting in tenant acme."""
    with psycopg.connect(login_dsn(dsn, role), autocommit=autocommit) as conn:
        assert conn.execute("SELECT session_user::text").fetchone() == (role,)
        conn.execute("SELECT set_config('memgov.org_id', %s, false)", (ORG,))
        if not autocommit:
            conn.commit()
        yield conn


@pytest.fixture
def su(db_conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """Superuser connection; every test starts from an empty log and an allow-all policy, and
    archival without a floor (archive_min_age 0: these tests archive what they just wrote)."""
    fresh(db_conn, slate)
    return db_conn


def slate(conn: psycopg.Connection[Any]) -> None:
    conn.execute("UPDATE memgov.settings SET value = 0 WHERE name = 'archive_min_age'")
    conn.execute(compile_policy(load_policy(POLICY), "*").install_sql())


@pytest.fixture
def admin(memgov_dsn: str, logins: dict[str, str], su: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    with login(memgov_dsn, logins["admin"]) as conn:
        yield conn


@pytest.fixture
def writer(memgov_dsn: str, logins: dict[str, str], su: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    with login(memgov_dsn, logins["writer"]) as conn:
        yield conn


def write(conn: psycopg.Connection[Any], text: str = "likes green tea") -> int:
    """A governed INSERT; returns the id of the decision it logged."""
    row = conn.execute(
        "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
        " VALUES (%s, 'user_fact', %s, 'agent_extracted', %s) RETURNING decision_id",
        (ORG, text, Decimal("0.9")),
    ).fetchone()
    assert row is not None and row[0] is not None
    return int(row[0])


def writes(conn: psycopg.Connection[Any], n: int) -> list[int]:
    """``n`` governed INSERTs, each its own transaction; returns once all of them are sealable."""
    ids = [write(conn, f"fact number {i}") for i in range(n)]
    if conn.autocommit:
        sealable(conn)
    return ids


def sealable(conn: psycopg.Connection[Any]) -> None:
    """Wait until every transaction that began before now has ended, so that the seal's
    horizon (the oldest running transaction) is past them. Any transaction of the cluster
    holds it back while it runs, an autovacuum's ANALYZE of another database included: on
    a loaded machine one may still be running when the test seals."""
    target = conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text").fetchone()[0]
    wait_for(
        lambda: conn.execute("SELECT pg_snapshot_xmin(pg_current_snapshot()) >= %s::xid8", (target,)).fetchone()[0],
        "the transactions before the seal to end",
    )


def seal(conn: psycopg.Connection[Any], batch_rows: int | None = None) -> dict[str, Any]:
    if batch_rows is None:
        return conn.execute("SELECT memgov.seal_decision_log()").fetchone()[0]
    return conn.execute("SELECT memgov.seal_decision_log(%s)", (batch_rows,)).fetchone()[0]


def verify(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    return conn.execute("SELECT memgov.verify_decision_log()").fetchone()[0]


def log_state(su: psycopg.Connection[Any]) -> dict[str, list[str]]:
    """Every row of the log, its seals and its archive records, as the superuser sees them."""
    return {
        table: [r[0] for r in su.execute(
            sql.SQL("SELECT to_jsonb(t)::text FROM memgov.{} t ORDER BY 1").format(sql.Identifier(table)))]
        for table in LOG_TABLES
    }  # fmt: skip


def sealed_ids(su: psycopg.Connection[Any]) -> list[int]:
    rows = su.execute(
        "SELECT id FROM memgov.decision_log_seals, unnest(decision_ids) AS id ORDER BY seal_id"
    ).fetchall()
    return [r[0] for r in rows]


@contextmanager
def guard_lifted(su: psycopg.Connection[Any]) -> Iterator[None]:
    """What a superuser (or memgov_owner) can do and nobody else: switch the guard off."""
    with su.transaction():
        for table in LOG_TABLES:
            su.execute(sql.SQL("ALTER TABLE memgov.{} DISABLE TRIGGER refuse_change").format(sql.Identifier(table)))
        yield
        for table in LOG_TABLES:
            su.execute(
                sql.SQL("ALTER TABLE memgov.{} ENABLE ALWAYS TRIGGER refuse_change").format(sql.Identifier(table))
            )


def settings_changes(su: psycopg.Connection[Any]) -> list[int]:
    return [r[0] for r in su.execute("SELECT change_id FROM memgov.settings_changes ORDER BY change_id")]
