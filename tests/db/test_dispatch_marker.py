"""The contract between the compiler and memgov.rebuild_dispatch: the compiled
decide body carries one marker line, right after BEGIN, where the routing to
the tenants' policies goes when the global policy's body serves as memgov.decide."""

from __future__ import annotations

import dataclasses
import json

import pytest

from memgov_pg.compiler import TENANT_ROUTING_MARKER, compile_policy
from memgov_pg.deploy import evaluate
from memgov_pg.policy import load_policy
from tests.cli_helpers import raises_sqlstate
from tests.decision_cases import deploy_text, reset_policies

MARKER_LINE = "\n" + TENANT_ROUTING_MARKER + "\n"
# the global policy's values hold the marker's text too: only the compiler's line counts
TRAP = "x" + MARKER_LINE + "y"
GLOBAL = f"""
version: "1.0.0"
mode: strict
defaults: {{on_policy_miss: allow}}
rules:
  - {{id: trap, priority: 1, condition: {{fact_text: {json.dumps(TRAP)}}}, action: deny}}
  - {{id: pii, priority: 2, condition: {{content.contains_pii: true}}, action: quarantine}}
  - {{id: risky, priority: 3, condition: {{risk_level: critical}}, action: require_approval}}
"""
TENANT = """
version: "1.0.0"
defaults: {on_policy_miss: quarantine}
rules:
  - {id: gossip, priority: 1, category: gossip, action: allow}
"""
ITEM = {"category": "gossip", "fact_text": "hello", "source": "agent_extracted", "confidence": 0.5}


@pytest.fixture(autouse=True)
def clean(db_conn):
    reset_policies(db_conn)


def prosrc(conn, function: str) -> str:
    row = conn.execute("SELECT prosrc FROM pg_catalog.pg_proc WHERE oid = %s::regprocedure", (function,)).fetchone()
    assert row is not None
    return str(row[0])


def test_compiled_tenant_policy_carries_the_marker_once_right_after_begin(db_conn):
    compiled = compile_policy(load_policy(TENANT), "acme")
    decide = compiled.bodies[0]
    assert decide.count(MARKER_LINE) == 1
    assert "\nBEGIN" + MARKER_LINE in decide
    # explain and retention bodies are never spliced: no marker
    assert all(TENANT_ROUTING_MARKER not in body for body in compiled.bodies[1:])
    # what install_policy created is what the compiler wrote
    deploy_text(db_conn, TENANT, "acme.yaml", "acme")
    installed = prosrc(db_conn, f"memgov.{compiled.function_name}(memgov.long_term_memory_items, text, text)")
    assert installed.count(MARKER_LINE) == 1


def test_the_global_body_routes_tenants_after_its_marker(memgov_dsn, db_conn):
    deploy_text(db_conn, GLOBAL, "global.yaml", None)
    deploy_text(db_conn, TENANT, "acme.yaml", "acme")
    decide = prosrc(db_conn, "memgov.decide(memgov.long_term_memory_items, text, text)")
    at = decide.index(MARKER_LINE) + len(MARKER_LINE)
    assert decide[at:].startswith("    IF p_item.org_id = 'acme' THEN\n        RETURN memgov.policy_")
    assert decide.count("p_item.org_id = 'acme'") == 1

    # the tenant's policy decides for its tenant: its rule, then its miss
    assert evaluate(memgov_dsn, ITEM | {"org_id": "acme"})["matched_rule_ids"] == ["gossip"]
    assert evaluate(memgov_dsn, ITEM | {"org_id": "acme", "category": "x"})["action"] == "quarantine"
    # everyone else gets the global body, whole: its rules, strict mode and its miss (deny, strict)
    miss = evaluate(memgov_dsn, ITEM | {"org_id": "globex"})
    assert (miss["action"], miss["reason_codes"], miss["mode"]) == ("deny", ["DEFAULT_POLICY"], "strict")
    assert evaluate(memgov_dsn, ITEM | {"org_id": "globex", "fact_text": TRAP})["matched_rule_ids"] == ["trap"]
    pii = evaluate(memgov_dsn, ITEM | {"org_id": "globex", "fact_text": "mail me at jane.doe@example.com"})
    assert pii["matched_rule_ids"] == ["pii"]
    strict = evaluate(memgov_dsn, ITEM | {"org_id": "globex", "fact_text": None})
    assert strict["reason_codes"] == ["STRICT_INCOMPLETE"]
    # the routing comes before the global body's own checks: strict mode is the global policy's
    assert evaluate(memgov_dsn, ITEM | {"org_id": "acme", "fact_text": None})["matched_rule_ids"] == ["gossip"]


def test_rebuild_dispatch_refuses_a_global_body_without_the_marker(memgov_dsn, db_conn):
    deploy_text(db_conn, TENANT, "acme.yaml", "acme")
    compiled = compile_policy(load_policy(GLOBAL), "*")
    assert compiled.bodies[0].count(MARKER_LINE) == 1  # the trap's value cannot forge one
    unmarked = compiled.bodies[0].replace(MARKER_LINE, "\n")
    forged = dataclasses.replace(compiled, bodies=(unmarked, *compiled.bodies[1:]))
    with raises_sqlstate("MG500") as raised:
        with db_conn.transaction():
            db_conn.execute(forged.install_sql())
    assert "tenant routing marker" in str(raised.value)
    assert compiled.bodies[0].endswith("\nEND\n")
    twice = compiled.bodies[0].removesuffix("\nEND\n") + MARKER_LINE + "END\n"
    with raises_sqlstate("MG500"), db_conn.transaction():
        db_conn.execute(dataclasses.replace(compiled, bodies=(twice, *compiled.bodies[1:])).install_sql())
    # nothing changed: the tenant policy still decides, no global policy is active
    assert evaluate(memgov_dsn, ITEM | {"org_id": "acme"})["matched_rule_ids"] == ["gossip"]
    assert evaluate(memgov_dsn, ITEM | {"org_id": "globex"})["reason_codes"] == ["NO_ACTIVE_POLICY"]
