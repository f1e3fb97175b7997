"""A decision's JSON and the outcome's (the decision and the ids of what was logged and filed):
the same keys and values, and the outcome the held write's NOTICE carries."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

DECISIONS = [
    "ROW('require_approval', ARRAY['AGENT_LOW_CONFIDENCE'], ARRAY['r-1'], '1.0.0', 'enforce', true, 0.42, 'medium')",
    "ROW('deny', ARRAY[]::text[], ARRAY[]::text[], NULL, NULL, false, NULL, NULL)",
]
IDS = ["decision_id", "memory_id", "request_id", "quarantine_id"]


@pytest.mark.parametrize("decision", DECISIONS)
def test_the_outcome_is_the_decision_and_its_ids(db_conn: psycopg.Connection[Any], decision: str) -> None:
    row = db_conn.execute(
        f"""SELECT memgov.decision_json(d), memgov.outcome_json(d, 7, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', NULL,
                                                           'b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12')
              FROM (SELECT {decision}::memgov.decision AS d) AS x"""
    ).fetchone()
    assert row is not None
    decision_json, outcome = row
    assert {k: v for k, v in outcome.items() if k not in IDS} == decision_json
    assert {k: outcome[k] for k in IDS} == {
        "decision_id": 7,
        "memory_id": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        "request_id": None,
        "quarantine_id": "b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12",
    }
