"""A database at 0002_second_release, with stored, shared, held and sealed decisions written by
real logins, upgrades to 0003_outcome_json: nothing is lost, the sealed log stays intact, the
request filed before the upgrade is approved after it, and a held write's NOTICE carries its
outcome (the decision and the ids of what was logged and filed) as memgov.outcome_json builds it."""

from __future__ import annotations

import json
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
    "VALUES ('acme', %s, %s, 'agent_extracted', %s)"
)
OUTCOME_KEYS = {"action", "reason_codes", "matched_rule_ids", "policy_version", "mode", "enforced",
                "risk_score", "risk_level", "decision_id", "memory_id", "request_id", "quarantine_id"}  # fmt: skip


def held_write(writer: psycopg.Connection[Any], text: str) -> list[dict[str, Any]]:
    """The outcomes (NOTICE MG201's DETAIL) of a write the default policy holds (an agent's fact at 0.6)."""
    held: list[dict[str, Any]] = []

    def notice(diag: psycopg.errors.Diagnostic) -> None:  # a Diagnostic is read inside its callback
        if diag.sqlstate == "MG201":
            held.append(json.loads(diag.message_detail or "{}"))

    writer.add_notice_handler(notice)
    writer.execute(INSERT, ("user_fact", text, 0.6))
    writer.remove_notice_handler(notice)
    return held


@pytest.mark.slow
def test_a_populated_0002_database_upgrades_to_0003(memgov_server: Any, logins: Logins) -> None:
    name = "upgrade_from_0002"
    memgov_server.drop_database(name)
    dsn = memgov_server.create_database(name)
    try:
        upgrade(dsn, "0002_second_release")
        deploy(dsn, ROOT / "policies" / "default.yaml")
        with connect_login(dsn, logins.writer) as writer:
            writer.execute(INSERT, ("preference", "Prefers tea", 0.9))
            writer.execute(
                "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence) "
                "SELECT 'acme', 'preference', 'Bulk fact ' || i, 'agent_extracted', 0.9 FROM generate_series(1, 50) i"
            )
            (before_outcome,) = held_write(writer, "Has a cat named Miso")
        sealed_upgrade(dsn, "0003_outcome_json")

        # the outcome a held write reports: 0002 merged two objects, 0003 builds one; same keys
        with connect_login(dsn, logins.writer) as writer:
            (after_outcome,) = held_write(writer, "Walks the dog at noon")
        assert set(before_outcome) == set(after_outcome) == OUTCOME_KEYS
        assert after_outcome["action"] == "require_approval" and after_outcome["request_id"]
        with psycopg.connect(dsn, autocommit=True) as su:
            logged = su.execute(
                "SELECT d.decision_id FROM memgov.approval_requests r JOIN memgov.decision_log d"
                " ON d.org_id = r.org_id AND d.decision_id = r.decision_id WHERE r.request_id = %s",
                (after_outcome["request_id"],),
            ).fetchone()
            assert logged == (after_outcome["decision_id"],)

        # the request the release filed is approved by another login after the upgrade
        with connect_login(dsn, logins.reviewer) as reviewer:
            approved = reviewer.execute(
                "SELECT memgov.approve(%s) ->> 'status'", (before_outcome["request_id"],)
            ).fetchone()
            assert approved == ("approved",)
    finally:
        memgov_server.drop_database(name)
