"""Helpers of the retention tests (tests/db/test_retention*.py): the test policy, its
superuser fixture, memories written, back-dated and swept.

Time is moved by back-dating rows as a superuser through memgov_owner (the
engine's own path), never by a setting a writer could use.
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import psycopg
import pytest

from memgov_pg.compiler import compile_policy
from memgov_pg.policy import load_policy
from tests.attack_helpers import AsRole
from tests.clean_slate import fresh

POLICY = """
version: "{version}"
defaults: {{on_policy_miss: allow}}
sources: {{user_confirmed: ["*"]}}
retention: {{batch_size: {batch_size}, confidence_floor: {floor}, confidence_grace: 30 days, approval_ttl: 7 days}}
rules:
  - {{id: hold-words, priority: 20, when: [{{field: fact_text, operator: contains, value: HOLDME}}],
      action: require_approval}}
  - {{id: drop-scratch, priority: 100, category: scratch, condition: {{confidence: {{lt: 0.5}}}},
      action: auto_delete, reason_codes: [SCRATCH]}}
"""


ORG = "acme"


def deploy(conn: psycopg.Connection[Any], version: str = "1.0.0", *, batch_size: int = 5000,
           floor: str = "0.3", tenant: str = "*", text: str | None = None) -> None:  # fmt: skip
    source = text or POLICY.format(version=version, batch_size=batch_size, floor=floor)
    conn.execute(compile_policy(load_policy(source), tenant).install_sql())


@pytest.fixture
def su(db_conn):
    """Superuser connection; every test starts from empty tables and the test policy."""
    fresh(db_conn, deploy)
    return db_conn


@pytest.fixture
def writer(as_role: AsRole) -> psycopg.Connection[Any]:
    """memgov_writer by SET ROLE in tenant acme (not a login: the attack tests use logins)."""
    return as_role("memgov_writer")


def remember(conn: psycopg.Connection[Any], text: str = "a fact", confidence: str = "0.9",
             retention: str = "permanent_until_revoked", category: str = "user_fact",
             org: str = ORG) -> uuid.UUID:  # fmt: skip
    return conn.execute(
        "INSERT INTO memgov.long_term_memory_items"
        " (org_id, category, fact_text, source, confidence, retention_policy)"
        " VALUES (%s, %s, %s, 'agent_extracted', %s, %s) RETURNING memory_id",
        (org, category, text, Decimal(confidence), retention),
    ).fetchone()[0]


def backdate(su: psycopg.Connection[Any], memory_id: uuid.UUID, column: str, age: str) -> None:
    """Let ``age`` pass for one engine-maintained timestamp of a memory (as memgov_owner)."""
    assert column in ("created_at", "low_confidence_since", "last_confirmed_at")
    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute(
            f"UPDATE memgov.long_term_memory_items SET {column} = now() - %s::interval WHERE memory_id = %s",
            (age, memory_id),
        )


def row(su: psycopg.Connection[Any], memory_id: uuid.UUID) -> dict[str, Any] | None:
    cur = su.execute("SELECT * FROM memgov.long_term_memory_items WHERE memory_id = %s", (memory_id,))
    found = cur.fetchone()
    return None if found is None else dict(zip([c.name for c in cur.description], found, strict=True))


def alive(su: psycopg.Connection[Any], *ids: uuid.UUID) -> set[uuid.UUID]:
    return {r[0] for r in su.execute(
        "SELECT memory_id FROM memgov.long_term_memory_items WHERE memory_id = ANY(%s)", (list(ids),))}  # fmt: skip


def sweep(conn: psycopg.Connection[Any], dry_run: bool = False) -> dict[str, Any]:
    conn.execute("CALL memgov.run_maintenance(%s)", (dry_run,))
    return conn.execute("SELECT summary FROM memgov.maintenance_runs ORDER BY run_id DESC LIMIT 1").fetchone()[0]


def deletions(su: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    """A row per deleted memory (the log holds a row per batch and tenant, with their ids)."""
    return su.execute(
        "SELECT m.memory_id, d.org_id, d.reason, d.rule_id, d.policy_version"
        " FROM memgov.deletion_log d CROSS JOIN LATERAL unnest(d.memory_ids) AS m(memory_id)"
        " ORDER BY d.deletion_id, m.memory_id"
    ).fetchall()


def logged_ids(conn: psycopg.Connection[Any], where: str = "true", params: tuple[Any, ...] = ()) -> list[uuid.UUID]:
    return [r[0] for r in conn.execute(
        f"SELECT unnest(memory_ids) FROM memgov.deletion_log WHERE {where}", params)]  # fmt: skip


def seed_expired(su: psycopg.Connection[Any], n: int, text: str = "expired", retention: str = "ttl_7d",
                 org: str = ORG) -> None:  # fmt: skip
    """n expired memories, inserted on the engine's path (as memgov_owner) in one statement."""
    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute(
            "INSERT INTO memgov.long_term_memory_items"
            " (org_id, category, fact_text, source, confidence, retention_policy, created_at)"
            " SELECT %s, 'user_fact', %s || ' ' || g, 'agent_extracted', 0.9, %s, now() - interval '8 days'"
            " FROM generate_series(1, %s) g",
            (org, text, retention, n),
        )
