"""Helpers of the governed-read tests (tests/db/test_recall*.py): a governed session, a
search, what it returned and what it logged.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.attack_helpers import (
    READ_POLICY,
    deploy_policy,
    insert,
    item,
    seed,
)


@pytest.fixture
def governed(su: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """The attack policy with read rules, globally."""
    deploy_policy(su, "2.0.0", READ_POLICY)
    return su


def search(conn: psycopg.Connection[Any], **query: Any) -> list[dict[str, Any]]:
    cur = conn.execute("SELECT * FROM memgov.search(%s)", (Jsonb(query),))
    names = [c.name for c in cur.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def texts(rows: list[dict[str, Any]]) -> list[str]:
    return [r["fact_text"] for r in rows]


def last_log(su: psycopg.Connection[Any]) -> dict[str, Any]:
    cur = su.execute("SELECT * FROM memgov.decision_log ORDER BY decision_id DESC LIMIT 1")
    row = cur.fetchone()
    assert row is not None
    return dict(zip([c.name for c in cur.description or ()], row, strict=True))


def visible(conn: psycopg.Connection[Any]) -> set[str]:
    return {r[0] for r in conn.execute("SELECT fact_text FROM memgov.long_term_memory_items").fetchall()}


def notices(conn: psycopg.Connection[Any]) -> list[tuple[str | None, dict[str, Any]]]:
    """The (SQLSTATE, detail) of each notice the connection receives from now on (a
    Diagnostic is only readable inside the handler)."""
    got: list[tuple[str | None, dict[str, Any]]] = []
    conn.add_notice_handler(lambda n: got.append((n.sqlstate, json.loads(n.message_detail or "{}"))))
    return got


def hidden_rows(su: psycopg.Connection[Any], writer: psycopg.Connection[Any]) -> tuple[uuid.UUID, uuid.UUID]:
    """A sensitive memory (withheld where reads are governed) and a pending one, both of
    acme, as committed rows the writer did not just write; ANALYZE fills pg_stats."""
    sensitive = seed(su, fact_text="green tea for the ulcer", is_sensitive=True)
    row = insert(writer, item("held")).fetchone()
    assert row is not None and row[1] == "pending_approval"
    su.execute("ANALYZE memgov.long_term_memory_items")
    return sensitive, row[0]
