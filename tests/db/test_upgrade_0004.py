"""A database at 0003_outcome_json, with stored, shared, held and sealed decisions written by
real logins, upgrades to 0004_tenant_check: nothing is lost, the sealed log stays intact, and
row security holds a writer login to the same tenant ids as before (1 to 63 characters, the
first a letter or digit) while a bulk statement still lists the memories of its decision."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from memgov_pg.deploy import deploy
from memgov_pg.migrate import upgrade
from tests.attack_helpers import Logins, connect_login
from tests.upgrade_helpers import sealed_upgrade

ROOT = Path(__file__).resolve().parents[2]
INSERT = (
    "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence) "
    "VALUES (%s, %s, %s, 'agent_extracted', %s)"
)
BULK = (
    "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence) "
    "SELECT 'acme', 'preference', %s || i, 'agent_extracted', 0.9 FROM generate_series(1, 20) i"
)
LONGEST = "a" * 63  # a tenant id at its longest; one character more is none


def tenant_writes(dsn: str, writer: str) -> dict[str, str]:
    """What a writer login's INSERT of one memory does under each session tenant: stored or its SQLSTATE."""
    out = {}
    for org in (LONGEST, LONGEST + "a", "-acme", "acme\n"):
        with connect_login(dsn, writer, org=org) as conn:
            try:
                conn.execute(INSERT, (org, "preference", "Prefers green tea", 0.9))
                out[org] = "stored"
            except psycopg.Error as e:
                out[org] = e.sqlstate or "?"
    return out


def shared(su: psycopg.Connection[Any], prefix: str) -> list[tuple[int, int]]:
    """The log rows the memories of one bulk statement name: (memory_count, memories naming it)."""
    return su.execute(
        "SELECT d.memory_count, count(*)::int FROM memgov.long_term_memory_items m"
        " JOIN memgov.decision_log d ON d.org_id = m.org_id AND d.decision_id = m.decision_id"
        " WHERE m.fact_text LIKE %s GROUP BY d.decision_id, d.memory_count",
        (prefix + "%",),
    ).fetchall()


@pytest.mark.slow
def test_a_populated_0003_database_upgrades_to_0004(memgov_server: Any, logins: Logins) -> None:
    name = "upgrade_from_0003"
    memgov_server.drop_database(name)
    dsn = memgov_server.create_database(name)
    try:
        upgrade(dsn, "0003_outcome_json")
        deploy(dsn, ROOT / "policies" / "default.yaml")
        with connect_login(dsn, logins.writer) as writer:
            writer.execute(INSERT, ("acme", "preference", "Prefers tea", 0.9))
            writer.execute(BULK, ("Bulk fact before ",))
            writer.execute(INSERT, ("acme", "user_fact", "Has a cat named Miso", 0.6))  # held
        before_tenants = tenant_writes(dsn, logins.writer)
        sealed_upgrade(dsn, "0004_tenant_check")

        # the same tenant ids are stored and refused as before the upgrade
        assert before_tenants == {LONGEST: "stored", LONGEST + "a": "42501", "-acme": "42501", "acme\n": "42501"}
        assert tenant_writes(dsn, logins.writer) == before_tenants

        # a bulk statement's rows still share one log row that lists them all (flush_batch)
        with connect_login(dsn, logins.writer) as writer:
            writer.execute(BULK, ("Bulk fact after ",))
        with psycopg.connect(dsn, autocommit=True) as su:
            assert shared(su, "Bulk fact before ") == shared(su, "Bulk fact after ") == [(20, 20)]
    finally:
        memgov_server.drop_database(name)
