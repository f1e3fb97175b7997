"""The write path (docs/reference.md, "Actions"): every action × operation × mode, as a writer role
that does not own the table, through plain SQL as psql or any client sends it."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from psycopg import errors, sql
from psycopg.types.json import Jsonb

from memgov_pg.compiler import compile_policy
from memgov_pg.policy import load_policy
from tests.attack_helpers import AsRole
from tests.clean_slate import fresh
from tests.cli_helpers import raises_sqlstate
from tests.decision_cases import reset_policies
from tests.waiting import DEADLINE

POLICY = """
version: "{version}"
mode: {mode}
defaults: {{on_policy_miss: {miss}}}
sources: {{user_confirmed: ["*"], system_rule: [memgov_admin]}}
rules:
  - {{id: deny-words, priority: 10, when: [{{field: fact_text, operator: contains, value: DENYME}}],
      action: deny, reason_codes: [NOPE]}}
  - {{id: hold-words, priority: 20, when: [{{field: fact_text, operator: contains, value: HOLDME}}],
      action: require_approval}}
  - {{id: quarantine-words, priority: 30, when: [{{field: fact_text, operator: contains, value: QUARANTINEME}}],
      action: quarantine}}
  - {{id: project-rule, priority: 40, condition: {{scope.project_id: special}}, action: allow}}
"""
ORG = "acme"


def deploy(conn: psycopg.Connection[Any], mode: str = "enforce", miss: str = "allow", version: str = "1.0.0") -> None:
    reset_policies(conn)
    policy = load_policy(POLICY.format(version=version, mode=mode, miss=miss))
    conn.execute(compile_policy(policy).install_sql())


@pytest.fixture
def su(db_conn):
    """Superuser connection; starts each test from an empty table and the enforce policy."""
    fresh(db_conn, deploy)
    return db_conn


@pytest.fixture
def writer(as_role: AsRole) -> psycopg.Connection[Any]:
    """memgov_writer by SET ROLE in tenant acme (not a login: the attack tests use logins)."""
    return as_role("memgov_writer")


@pytest.fixture
def reviewer(as_role: AsRole) -> psycopg.Connection[Any]:
    """memgov_reviewer by SET ROLE in tenant acme (not a login: the attack tests use logins)."""
    return as_role("memgov_reviewer")


def insert(conn: psycopg.Connection[Any], text: str, **extra: Any) -> psycopg.Cursor[Any]:
    row = {"org_id": ORG, "category": "user_fact", "fact_text": text, "source": "agent_extracted",
           "confidence": 0.9} | extra  # fmt: skip
    cols = ", ".join(row)
    params = ", ".join(f"%({k})s" for k in row)
    return conn.execute(
        f"INSERT INTO memgov.long_term_memory_items ({cols}) VALUES ({params}) RETURNING memory_id, status", row
    )


def seed(su: psycopg.Connection[Any], text: str) -> uuid.UUID:
    """A stored row, put there on the engine's own path (no decision)."""
    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_owner")
        row = insert(su, text).fetchone()
    return row[0]


def log(su: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return su.execute(
        "SELECT operation, action, enforced, matched_rule_ids, actor FROM memgov.decision_log ORDER BY decision_id"
    ).fetchall()


def items(su: psycopg.Connection[Any]) -> dict[str, str]:
    return dict(su.execute("SELECT fact_text, status FROM memgov.long_term_memory_items").fetchall())


# -- INSERT (remember) -------------------------------------------------------------


def test_insert_allow_is_stored_active_with_its_decision(writer, su):
    memory_id, status = insert(writer, "likes tea").fetchone()
    assert status == "active"
    row = su.execute(
        "SELECT m.policy_version, d.action, d.actor, d.operation, d.memory_id"
        " FROM memgov.long_term_memory_items m JOIN memgov.decision_log d USING (decision_id)"
    ).fetchone()
    assert row == ("1.0.0", "allow", "memgov_writer", "remember", memory_id)


def test_insert_deny_raises_mg403_naming_rule_and_reasons(writer, su):
    with raises_sqlstate("MG403") as info:
        insert(writer, "DENYME please")
    assert "deny-words" in str(info.value) and "NOPE" in str(info.value)
    assert '"reason_codes": ["NOPE"]' in info.value.diag.message_detail
    assert items(su) == {}
    assert log(su) == []  # the writer's transaction was aborted, its log row with it


def test_insert_require_approval_stores_pending_row_and_request(writer, su, memgov_dsn):
    with psycopg.connect(memgov_dsn, autocommit=True) as listener:
        listener.execute("SET ROLE memgov_reviewer")
        listener.execute("SET memgov.org_id = 'acme'")
        (channel,) = listener.execute("SELECT memgov.approval_channel()").fetchone()
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        notices: list[str | None] = []
        writer.add_notice_handler(lambda diag: notices.append(diag.sqlstate))
        memory_id, status = insert(writer, "HOLDME a fact").fetchone()
        assert status == "pending_approval"
        request = su.execute(
            "SELECT request_id, memory_id, operation, status, requested_by FROM memgov.approval_requests"
        ).fetchone()
        assert request[1:] == (memory_id, "remember", "pending", "memgov_writer")
        assert notices == ["MG201"]
        notify = next(listener.notifies(timeout=DEADLINE, stop_after=1), None)
        assert notify is not None, "no notification on the approval channel"
        assert notify.channel == channel and notify.payload == str(request[0])


def test_insert_quarantine_diverts_the_payload_and_stores_nothing(writer, su):
    notices: list[str | None] = []
    writer.add_notice_handler(lambda diag: notices.append(diag.sqlstate))
    cur = insert(writer, "QUARANTINEME secret plan")
    assert cur.rowcount == 0
    assert notices == ["MG202"]
    assert items(su) == {}
    payload, decision, status = su.execute("SELECT payload, decision, status FROM memgov.quarantine").fetchone()
    assert payload["fact_text"] == "QUARANTINEME secret plan" and status == "held"
    assert decision["matched_rule_ids"] == ["quarantine-words"]


# -- UPDATE ------------------------------------------------------------------------------


def test_update_allow_applies(writer, su):
    seed(su, "old text")
    assert writer.execute("UPDATE memgov.long_term_memory_items SET fact_text = 'new text'").rowcount == 1
    assert items(su) == {"new text": "active"}
    assert log(su)[-1][:2] == ("update", "allow")


def test_update_deny_raises_and_keeps_the_row(writer, su):
    seed(su, "old text")
    with raises_sqlstate("MG403"):
        writer.execute("UPDATE memgov.long_term_memory_items SET fact_text = 'DENYME'")
    assert items(su) == {"old text": "active"}


def test_update_held_for_approval_keeps_the_row_until_approved(writer, reviewer, su):
    memory_id = seed(su, "old text")
    assert writer.execute("UPDATE memgov.long_term_memory_items SET fact_text = 'HOLDME new'").rowcount == 0
    assert items(su) == {"old text": "active"}
    request_id, payload = su.execute("SELECT request_id, payload FROM memgov.approval_requests").fetchone()
    assert payload["fact_text"] == "HOLDME new" and payload["memory_id"] == str(memory_id)
    result = reviewer.execute("SELECT memgov.approve(%s, 'looks right')", (request_id,)).fetchone()[0]
    assert result["status"] == "approved"
    assert items(su) == {"HOLDME new": "active"}
    assert su.execute("SELECT status, decided_by, note FROM memgov.approval_requests").fetchone() == (
        "approved", "memgov_reviewer", "looks right",
    )  # fmt: skip


def test_update_quarantined_leaves_the_row(writer, su):
    seed(su, "old text")
    assert writer.execute("UPDATE memgov.long_term_memory_items SET fact_text = 'QUARANTINEME'").rowcount == 0
    assert items(su) == {"old text": "active"}
    assert su.execute("SELECT operation FROM memgov.quarantine").fetchone() == ("update",)


def test_a_pending_memory_is_frozen(writer, su):
    insert(writer, "HOLDME pending")
    # a writer does not see pending rows (docs/recall.md): its UPDATE reaches none
    assert writer.execute("UPDATE memgov.long_term_memory_items SET confidence = 0.5").rowcount == 0
    with raises_sqlstate("MG409"):  # an su sees it, and the engine refuses the change
        su.execute("UPDATE memgov.long_term_memory_items SET confidence = 0.5")
    assert items(su) == {"HOLDME pending": "pending_approval"}


def test_update_cannot_move_a_memory_to_another_tenant(su):
    seed(su, "fact")
    with pytest.raises(errors.InsufficientPrivilege):
        su.execute("UPDATE memgov.long_term_memory_items SET org_id = 'other'")


# -- DELETE (forget) ---------------------------------------------------------------------
# Writers forget through memgov.forget(): a table-level DELETE would also let them LOCK
# the table against every tenant. A DELETE by a role that has the privilege (a superuser,
# here) is decided all the same.


def forget(conn: psycopg.Connection[Any], memory_id: uuid.UUID) -> Any:
    return conn.execute("SELECT memgov.forget(%s)", (memory_id,)).fetchone()[0]


def test_writers_have_no_delete(writer, su):
    seed(su, "fact")
    with raises_sqlstate("42501"):
        writer.execute("DELETE FROM memgov.long_term_memory_items")
    assert list(items(su)) == ["fact"]


def test_forget_allow_deletes(writer, su):
    memory_id = seed(su, "fact")
    assert forget(writer, memory_id)["action"] == "allow"
    assert items(su) == {}
    assert log(su)[-1][:2] == ("forget", "allow")


def test_forget_deny_keeps_the_row(writer, su):
    memory_id = seed(su, "DENYME stored earlier")
    with raises_sqlstate("MG403"):
        forget(writer, memory_id)
    assert list(items(su)) == ["DENYME stored earlier"]


def test_plain_delete_is_decided_too(su):
    seed(su, "DENYME stored earlier")
    with raises_sqlstate("MG403"):
        su.execute("DELETE FROM memgov.long_term_memory_items")
    assert list(items(su)) == ["DENYME stored earlier"]


def test_forget_held_until_approved(writer, reviewer, su):
    memory_id = seed(su, "HOLDME stored earlier")
    assert forget(writer, memory_id)["action"] == "require_approval"
    assert list(items(su)) == ["HOLDME stored earlier"]
    (request_id,) = su.execute("SELECT request_id FROM memgov.approval_requests WHERE operation = 'forget'").fetchone()
    reviewer.execute("SELECT memgov.approve(%s)", (request_id,))
    assert items(su) == {}


def test_forget_quarantined_keeps_the_row(writer, su):
    memory_id = seed(su, "QUARANTINEME stored earlier")
    assert forget(writer, memory_id)["action"] == "quarantine"
    assert list(items(su)) == ["QUARANTINEME stored earlier"]


# -- modes ----------------------------------------------------------------------------------


def test_monitor_mode_logs_and_lets_everything_through(writer, su):
    deploy(su, mode="monitor", version="2.0.0")
    insert(writer, "DENYME")
    insert(writer, "HOLDME")
    insert(writer, "QUARANTINEME")
    assert items(su) == {"DENYME": "active", "HOLDME": "active", "QUARANTINEME": "active"}
    assert [(a, e, r) for _, a, e, r, _ in log(su)] == [
        ("deny", False, ["deny-words"]),
        ("require_approval", False, ["hold-words"]),
        ("quarantine", False, ["quarantine-words"]),
    ]
    assert su.execute("SELECT count(*) FROM memgov.approval_requests").fetchone() == (0,)


def test_strict_mode_denies_misses_and_incomplete_writes(writer, su):
    deploy(su, mode="strict", miss="allow", version="3.0.0")
    with raises_sqlstate("MG403") as info:
        insert(writer, "plain fact", project_id="p1")
    assert "DEFAULT_POLICY" in str(info.value)
    with raises_sqlstate("MG403") as info:
        insert(writer, "plain fact")  # the policy reads scope.project_id, which is NULL
    assert "STRICT_INCOMPLETE" in str(info.value)
    assert insert(writer, "plain fact", project_id="special").fetchone()[1] == "active"


def test_no_active_policy_fails_closed(writer, su):
    reset_policies(su)
    with raises_sqlstate("MG403") as info:
        insert(writer, "anything")
    assert "NO_ACTIVE_POLICY" in str(info.value)


# -- who may write what ------------------------------------------------------------------


def test_sources_map_limits_who_may_claim_system_rule(writer, su):
    with raises_sqlstate("MG403") as info:
        insert(writer, "a rule", source="system_rule")
    assert "SOURCE_NOT_PERMITTED" in str(info.value)
    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_admin")
        su.execute("SET LOCAL memgov.org_id = 'acme'")
        assert insert(su, "a rule", source="system_rule").fetchone()[1] == "active"


def test_replica_mode_does_not_switch_the_trigger_off(su):
    su.execute("SET session_replication_role = replica")
    try:
        with raises_sqlstate("MG403"):
            insert(su, "DENYME")
    finally:
        su.execute("SET session_replication_role = origin")


def test_truncate_is_refused_to_writers(writer, su):
    su.execute("GRANT TRUNCATE ON memgov.long_term_memory_items TO memgov_writer")
    try:
        with raises_sqlstate("MG403"):
            writer.execute("TRUNCATE memgov.long_term_memory_items")
    finally:
        su.execute("REVOKE TRUNCATE ON memgov.long_term_memory_items FROM memgov_writer")


def test_writer_cannot_call_the_engine_or_review(writer):
    with pytest.raises(errors.InsufficientPrivilege):
        writer.execute("SELECT memgov.approve(gen_random_uuid())")
    with raises_sqlstate("42501"):
        writer.execute(
            "SELECT memgov.govern('remember', NULL::memgov.long_term_memory_items, 'x', NULL::memgov.decision, NULL)"
        )
    with pytest.raises(errors.InsufficientPrivilege):
        writer.execute("DELETE FROM memgov.decision_log")


# -- review ------------------------------------------------------------------------------


def test_approval_honours_a_policy_change(writer, reviewer, su):
    insert(writer, "HOLDME later forbidden")
    (request_id,) = su.execute("SELECT request_id FROM memgov.approval_requests").fetchone()
    # the new version denies what the old one held
    policy = load_policy(
        POLICY.format(version="4.0.0", mode="enforce", miss="allow").replace("value: DENYME", "value: forbidden")
    )
    su.execute(compile_policy(policy).install_sql())
    result = reviewer.execute("SELECT memgov.approve(%s)", (request_id,)).fetchone()[0]
    assert result["status"] == "denied"
    assert result["decision"]["matched_rule_ids"] == ["deny-words"]
    assert (result["decision"]["action"], result["decision"]["policy_action"]) == ("deny", "deny")
    assert items(su) == {}


def test_approve_returns_the_decision_taken_and_logs_the_policys(writer, reviewer, su):
    memory_id = insert(writer, "HOLDME approved later").fetchone()[0]
    (request_id,) = su.execute("SELECT request_id FROM memgov.approval_requests").fetchone()
    result = reviewer.execute("SELECT memgov.approve(%s, 'fine')", (request_id,)).fetchone()[0]
    decision = result["decision"]
    assert (result["status"], result["memory_id"]) == ("approved", str(memory_id))
    # what happened: the write is applied; what the policy said on deciding it again: hold it
    assert (decision["action"], decision["policy_action"]) == ("allow", "require_approval")
    assert (decision["matched_rule_ids"], decision["request_id"]) == (["hold-words"], str(request_id))
    row = su.execute(
        "SELECT status, decision_id FROM memgov.long_term_memory_items WHERE memory_id = %s", (memory_id,)
    ).fetchone()
    assert row == ("active", decision["decision_id"])
    assert su.execute(
        "SELECT action, actor FROM memgov.decision_log WHERE decision_id = %s", (decision["decision_id"],)
    ).fetchone() == ("require_approval", "memgov_reviewer")


def test_an_approval_a_quarantine_rule_refuses_is_a_deny(writer, reviewer, su):
    insert(writer, "HOLDME for now")
    (request_id,) = su.execute("SELECT request_id FROM memgov.approval_requests").fetchone()
    policy = load_policy(
        POLICY.format(version="4.1.0", mode="enforce", miss="allow")
        .replace("value: QUARANTINEME", "value: for now")
        .replace("value: HOLDME", "value: NOTHING")
    )
    su.execute(compile_policy(policy).install_sql())
    result = reviewer.execute("SELECT memgov.approve(%s)", (request_id,)).fetchone()[0]
    assert result["status"] == "denied"
    # nothing was quarantined: the request was refused
    assert (result["decision"]["action"], result["decision"]["policy_action"]) == ("deny", "quarantine")
    assert su.execute("SELECT count(*) FROM memgov.quarantine").fetchone() == (0,)
    assert items(su) == {}


def test_deny_removes_the_pending_row(writer, reviewer, su):
    insert(writer, "HOLDME maybe")
    (request_id,) = su.execute("SELECT request_id FROM memgov.approval_requests").fetchone()
    assert reviewer.execute("SELECT memgov.deny(%s, 'no')", (request_id,)).fetchone()[0]["status"] == "denied"
    assert items(su) == {}
    with raises_sqlstate("MG409"):
        reviewer.execute("SELECT memgov.deny(%s)", (request_id,))


def test_reviewer_cannot_decide_its_own_request_or_another_tenants(writer, reviewer, su):
    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute(
            "INSERT INTO memgov.approval_requests (org_id, operation, payload, requested_by)"
            " VALUES ('acme', 'forget', '{}', 'memgov_reviewer'), ('globex', 'forget', '{}', 'memgov_writer')"
        )
    own, other = su.execute("SELECT request_id FROM memgov.approval_requests ORDER BY org_id").fetchall()
    with raises_sqlstate("42501"):
        reviewer.execute("SELECT memgov.approve(%s)", (own[0],))
    with raises_sqlstate("MG404"):
        reviewer.execute("SELECT memgov.approve(%s)", (other[0],))
    with raises_sqlstate("MG404"):
        reviewer.execute("SELECT memgov.approve(%s)", (uuid.uuid4(),))


def test_release_and_purge_quarantine(writer, reviewer, su):
    insert(writer, "QUARANTINEME one")
    insert(writer, "QUARANTINEME two")
    (first,), (second,) = su.execute(
        "SELECT quarantine_id FROM memgov.quarantine ORDER BY quarantined_at, payload->>'fact_text'"
    ).fetchall()
    reviewer.execute("SELECT memgov.release_quarantine(%s)", (first,))
    reviewer.execute("SELECT memgov.purge_quarantine(%s)", (second,))
    assert items(su) == {"QUARANTINEME one": "active"}
    rows = su.execute("SELECT status, resolved_by, payload FROM memgov.quarantine ORDER BY status").fetchall()
    assert rows[0][:2] == ("purged", "memgov_reviewer") and "fact_text" not in rows[0][2]
    assert rows[1][:2] == ("released", "memgov_reviewer")


# -- memgov.remember() ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "action", "stored", "key"),
    [
        ("plain", "allow", "active", "memory_id"),
        ("HOLDME", "require_approval", "pending_approval", "request_id"),
        ("QUARANTINEME", "quarantine", None, "quarantine_id"),
        ("DENYME", "deny", None, "decision_id"),
    ],
)
def test_remember_returns_the_decision_and_logs_denials(writer, su, text, action, stored, key):
    item = {"org_id": ORG, "category": "user_fact", "fact_text": text, "source": "agent_extracted", "confidence": 0.9}
    decision = writer.execute("SELECT memgov.remember(%s)", (Jsonb(item),)).fetchone()[0]
    assert decision["action"] == action
    assert decision[key] is not None
    assert items(su).get(text) == stored
    assert log(su)[-1][:2] == ("remember", action)
    # the capture settings do not leak into the rest of the transaction
    with raises_sqlstate("MG403"):
        insert(writer, "DENYME direct")
