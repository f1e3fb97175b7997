"""Attacks on the write path: its internals, engine columns, retention and govern_as.

Every test is one attack, named for it, run by login roles of the test cluster
(``user=<login>``; members of memgov_writer / memgov_reviewer / memgov_admin as
deployments grant them), never by a superuser that merely ``SET ROLE``s. Each
asserts that the attack fails (the SQLSTATE the engine promises) *and* that
every table, log and queue of schema memgov is exactly as it was
(tests/attack_helpers.py snapshots them all, tables added later included). The
fixtures (``su``, ``writer``, ``reviewer``, ``admin``, ``login``) are tests/db/conftest.py's.
Denial of service and locks are tests/db/test_attacks_denial.py.

Tests named ``test_NN_...`` reproduce the numbered findings of the first attack
review; ``test_x_...`` are variants found while writing these.
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Json, Jsonb

from tests.attack_helpers import (
    DAYS_AGO_10,
    GLOBAL_VERSION,
    ORG,
    OTHER,
    POLICY,
    as_json,
    assert_same,
    deploy_policy,
    held,
    insert,
    item,
    memgov_tables,
    memory,
    quarantined,
    refused,
    request_of,
    seed,
    snapshot,
    unchanged,
)

# == 2. govern_write (and its successors) called from the writer's own trigger ==========

_FORGE = """
CREATE FUNCTION pg_temp.forge() RETURNS trigger LANGUAGE plpgsql AS $forge$
DECLARE
    v_item memgov.long_term_memory_items :=
        jsonb_populate_record(NULL::memgov.long_term_memory_items, {item}::jsonb);
BEGIN
    PERFORM {call};
    RETURN NEW;
END
$forge$
"""


_FORGED_DECISION = (
    "ROW('allow', ARRAY['FORGED']::text[], ARRAY[]::text[], '1.0.0', 'enforce', true, 0, 'low')::memgov.decision"
)


_FORGE_CALLS = {
    "govern_write": "memgov.govern_write({op}, v_item, {actor})",
    "govern": "memgov.govern({op}, v_item, {actor}, " + _FORGED_DECISION + ", NULL)",
    "apply_write": "memgov.apply_write({op}, v_item, '1.0.0', NULL, false)",
}


@pytest.mark.parametrize("function", sorted(_FORGE_CALLS))
@pytest.mark.parametrize("forgery", ["foreign_tenant_as_admin", "forget_as_another_reviewer", "held_as_reviewer"])
def test_02_temp_table_trigger_cannot_reach_the_write_path(su, writer, logins, function, forgery):
    victim = seed(su, "allowed")
    forged: dict[str, Any]
    if forgery == "foreign_tenant_as_admin":
        op, actor = "remember", "memgov_admin"
        forged = as_json(item("allowed", org=OTHER, memory_id=uuid.uuid4(), source="user_confirmed",
                              created_at="2099-01-01T00:00:00Z", status="active")).obj  # fmt: skip
    elif forgery == "forget_as_another_reviewer":
        op, actor = "forget", logins.reviewer2
        forged = {"memory_id": str(victim), "org_id": ORG}
    else:
        op, actor = "remember", logins.reviewer
        forged = as_json(item("held", memory_id=uuid.uuid4())).obj
    call = _FORGE_CALLS[function].format(
        op=sql.Literal(op).as_string(writer), actor=sql.Literal(actor).as_string(writer)
    )
    body = _FORGE.format(item=sql.Literal(Json(forged)).as_string(writer), call=call)
    # an unknown function (42883) fails as surely as a refused one; both leave no trace
    with refused(su, "42501", "42883"):
        with writer.transaction():
            writer.execute("CREATE TEMP TABLE bait (x int)")
            writer.execute(body)
            writer.execute(
                "CREATE TRIGGER forge BEFORE INSERT ON pg_temp.bait FOR EACH ROW EXECUTE FUNCTION pg_temp.forge()"
            )
            writer.execute("INSERT INTO pg_temp.bait VALUES (1)")
    assert memory(su, victim) is not None


def test_02_no_client_role_may_execute_a_write_path_internal(su, logins):
    internals = su.execute(
        "SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = 'memgov'::regnamespace"
        " AND p.proname IN ('govern_write', 'govern', 'apply_write', 'close_request', 'approve_request',"
        " 'deny_request', 'govern_feedback_write', 'record_feedback', 'log_deletion', 'sweep_batch',"
        " 'enforce_write', 'log_decision', 'first_shared', 'share_decision', 'seal_batch', 'session_key',"
        " 'engine_token', 'engine_writes', 'engine_writes_done', 'is_engine_write', 'drop_samples')"
    ).fetchall()
    assert internals, "no write-path internals found"
    for role in ["memgov_writer", "memgov_reviewer", logins.writer, logins.reviewer, logins.both, logins.nobody]:
        may = [f for (f,) in internals
               if su.execute("SELECT has_function_privilege(%s, %s, 'EXECUTE')", (role, f)).fetchone()[0]]  # fmt: skip
        assert may == [], f"{role} may execute {may}"


# == 7. forget rules bypassed through retention ============================================


SHORTENINGS = [("permanent_until_revoked", "ttl_7d"), ("permanent_until_revoked", "ttl_30d"),
               ("permanent_until_revoked", "confidence_based"), ("ttl_30d", "ttl_7d")]  # fmt: skip


@pytest.mark.parametrize(("start", "to"), SHORTENINGS)
def test_07_life_shortening_update_of_a_legal_hold_memory_is_denied(su, writer, start, to):
    memory_id = seed(su, "legal", retention_policy=start, created_at=DAYS_AGO_10)
    with refused(su, "MG403"):
        writer.execute(
            "UPDATE memgov.long_term_memory_items SET retention_policy = %s WHERE memory_id = %s", (to, memory_id)
        )


def test_07_apply_retention_keeps_an_expired_legal_hold_memory(su, writer):
    memory_id = seed(su, "legal", retention_policy="ttl_7d", created_at=DAYS_AGO_10)
    with unchanged(su):
        result = writer.execute("SELECT memgov.apply_retention(%s)", (memory_id,)).fetchone()[0]
    assert result["deleted"] is False


def test_07_the_sweep_keeps_legal_hold_memories(su, admin):
    kept = [seed(su, "legal", retention_policy="ttl_7d", created_at=DAYS_AGO_10),
            seed(su, "legal", retention_policy="ttl_30d", metadata=Jsonb({"purge": "yes"}))]  # fmt: skip
    gone = [seed(su, "allowed", retention_policy="ttl_7d", created_at=DAYS_AGO_10),
            seed(su, "allowed", retention_policy="ttl_30d", metadata=Jsonb({"purge": "yes"}))]  # fmt: skip
    admin.execute("CALL memgov.run_maintenance()")
    assert [memory(su, m) is not None for m in kept] == [True, True]
    assert [memory(su, m) is None for m in gone] == [True, True], "the sweep did not run"
    logged = su.execute("SELECT count(*) FROM memgov.deletion_log WHERE memory_ids && %s::uuid[]", (kept,))
    assert logged.fetchone() == (0,)


def test_x_releasing_a_quarantined_forget_respects_a_legal_hold_placed_since(su, writer, reviewer):
    """A forget quarantined before the hold, released after it: approve() would re-decide and
    refuse; a release must not delete what the policy now holds."""
    start, end = POLICY.index("  - id: legal-hold-no-forget"), POLICY.index("  - id: block-secrets")
    deploy_policy(su, "1.1.0", text=POLICY[:start] + POLICY[end:])
    memory_id = seed(su, "legal", fact_text="signed by olena@example.com", context_source="custom")
    writer.execute("SELECT memgov.forget(%s)", (memory_id,))
    (quarantine_id,) = su.execute(
        "SELECT quarantine_id FROM memgov.quarantine WHERE memory_id = %s AND operation = 'forget'", (memory_id,)
    ).fetchone()
    deploy_policy(su, "1.2.0")
    with refused(su, "MG403"):
        reviewer.execute("SELECT memgov.release_quarantine(%s)", (quarantine_id,))


def test_x_reject_does_not_delete_a_legal_hold_memory(su, reviewer):
    memory_id = seed(su, "legal", confidence=Decimal("0.3"))
    reviewer.execute("SELECT memgov.reject(%s)", (memory_id,))
    assert memory(su, memory_id) is not None
    assert su.execute("SELECT count(*) FROM memgov.deletion_log").fetchone() == (0,)


def test_x_recategorising_a_legal_hold_memory_does_not_release_it(su, writer):
    """Two allowed steps: UPDATE category out of legal_hold, then forget() it."""
    memory_id = seed(su, "legal")
    before = snapshot(su)
    with pytest.raises(psycopg.Error) as info:
        with writer.transaction():
            writer.execute(
                "UPDATE memgov.long_term_memory_items SET category = 'user_fact' WHERE memory_id = %s", (memory_id,)
            )
            writer.execute("SELECT memgov.forget(%s)", (memory_id,))
    assert info.value.sqlstate == "MG403", info.value
    assert_same(before, snapshot(su))


# == 8. memgov.govern_as leaks in from the caller's session =================================


@pytest.fixture(params=["memgov_admin", "reviewer2"])
def forged_actor(request, logins) -> str:
    return "memgov_admin" if request.param == "memgov_admin" else logins.reviewer2


def test_08_govern_as_does_not_forge_a_writers_logged_actor(su, writer, logins, forged_actor):
    writer.execute("SELECT set_config('memgov.govern_as', %s, false)", (forged_actor,))
    memory_id = insert(writer, item("allowed")).fetchone()[0]
    assert su.execute("SELECT actor, login FROM memgov.decision_log WHERE memory_id = %s", (memory_id,)).fetchall() == [
        (logins.writer, logins.writer)
    ]


def test_08_govern_as_does_not_forge_the_confirming_reviewer(su, reviewer, logins, forged_actor):
    memory_id = seed(su, "allowed")
    reviewer.execute("SELECT set_config('memgov.govern_as', %s, false)", (forged_actor,))
    reviewer.execute("SELECT memgov.confirm(%s)", (memory_id,))
    reviewer.execute("SELECT memgov.reject(%s)", (memory_id,))
    assert su.execute("SELECT kind, actor, login FROM memgov.feedback_events ORDER BY event_id").fetchall() == [
        ("confirm", logins.reviewer, logins.reviewer), ("reject", logins.reviewer, logins.reviewer)]  # fmt: skip


def test_08_govern_as_does_not_forge_the_approving_reviewer(su, writer, reviewer, logins, forged_actor):
    _, request_id = held(writer, su)
    reviewer.execute("SELECT set_config('memgov.govern_as', %s, false)", (forged_actor,))
    reviewer.execute("SELECT memgov.approve(%s)", (request_id,))
    assert su.execute(
        "SELECT decided_by, decided_login FROM memgov.approval_requests WHERE request_id = %s", (request_id,)
    ).fetchone() == (logins.reviewer, logins.reviewer)
    assert su.execute("SELECT actor, login FROM memgov.decision_log ORDER BY decision_id DESC LIMIT 1").fetchone() == (
        logins.reviewer, logins.reviewer)  # fmt: skip


def test_08_govern_as_does_not_make_apply_retention_lie(su, writer, forged_actor):
    keep = seed(su, "allowed")
    due = seed(su, "allowed", retention_policy="ttl_7d", created_at=DAYS_AGO_10)
    writer.execute("SELECT set_config('memgov.govern_as', %s, false)", (forged_actor,))
    with unchanged(su):
        assert writer.execute("SELECT memgov.apply_retention(%s)", (keep,)).fetchone()[0]["deleted"] is False
    result = writer.execute("SELECT memgov.apply_retention(%s)", (due,)).fetchone()[0]
    assert result["deleted"] is True and memory(su, due) is None


INTERNAL_CALLS = {
    "apply_write": "SELECT memgov.apply_write('remember', jsonb_populate_record(NULL::memgov.long_term_memory_items,"
    ' \'{"org_id": "acme", "category": "user_fact", "fact_text": "x", "source": "system_rule",'
    ' "confidence": 1, "memory_id": "00000000-0000-0000-0000-000000000001"}\'), \'1.0.0\', NULL, false)',
    "govern": "SELECT memgov.govern('remember', jsonb_populate_record(NULL::memgov.long_term_memory_items,"
    " '{\"org_id\": \"acme\"}'), 'memgov_admin', " + _FORGED_DECISION + ", NULL)",
    "close_request": "SELECT memgov.close_request(r, 'approved', 'memgov_admin', 'forged')"
    " FROM memgov.approval_requests r",
    "approve_request": "SELECT memgov.approve_request(r, 'forged') FROM memgov.approval_requests r",
    "log_deletion": "SELECT memgov.log_deletion(m, 'ttl', NULL) FROM memgov.long_term_memory_items m",
    "record_feedback": "SELECT memgov.record_feedback(m, 'confirm', 1, 'forged') FROM memgov.long_term_memory_items m",
    "sweep_batch": "SELECT memgov.sweep_batch(1, 'ttl', 10)",
    "start_maintenance": "SELECT memgov.start_maintenance(false)",
    "claim_maintenance": "SELECT memgov.claim_maintenance()",
    "rebuild_dispatch": "SELECT memgov.rebuild_dispatch()",
    "install_policy": "SELECT memgov.install_policy('*', '9.9.9', repeat('0', 64), 'enforce',"
    " 'policy_0000000000000000',"
    " '', '', '', '', '{}', '[]')",
    "activate_policy": "SELECT memgov.activate_policy('*', '1.0.0')",
    "rollback_policy": "SELECT memgov.rollback_policy('*')",
    "undeploy_policy": "SELECT memgov.undeploy_policy('*', '1.0.0')",
    "run_maintenance": "CALL memgov.run_maintenance()",
    "grant_tenant": "SELECT memgov.grant_tenant(current_user, 'globex')",
    "check_tenant": "SELECT memgov.check_tenant('globex')",
    "memory_for_feedback": "SELECT memgov.memory_for_feedback(memory_id) FROM memgov.long_term_memory_items",
    "stage_policy": "SELECT memgov.stage_policy('*', '9.9.9', repeat('0', 64), 'enforce',"
    " 'policy_0000000000000000', '', '', '', '', '{}', '[]')",
    "start_shadow": "SELECT memgov.start_shadow('*', '1.0.0')",
    "open_shadow": "SELECT memgov.open_shadow('*', '1.0.0')",
    "end_shadow": "SELECT memgov.end_shadow('*', 'stopped')",
    "promote_shadow": "SELECT memgov.promote_shadow('*')",
    "stop_shadow": "SELECT memgov.stop_shadow('*')",
    "shadow_report": "SELECT memgov.shadow_report('*')",
    "replay": "SELECT memgov.replay('*', '1.0.0')",
    "rebuild_shadow_dispatch": "SELECT memgov.rebuild_shadow_dispatch()",
    "shadow_decide": "SELECT memgov.shadow_decide(m, 'remember', 'memgov_admin') FROM memgov.long_term_memory_items m",
    "judge_shadow": "SELECT memgov.judge_shadow('remember', m, NULL, 'memgov_admin')"
    " FROM memgov.long_term_memory_items m",
    "record_shadow": "SELECT memgov.record_shadow(ROW(1, "
    + _FORGED_DECISION
    + "), 'remember', m, "
    + _FORGED_DECISION
    + ", 1) FROM memgov.long_term_memory_items m",
    "divergences": "SELECT memgov.divergences(1, 3)",
    "keep_sample": "SELECT memgov.keep_sample('remember', m, 'memgov_admin', 1) FROM memgov.long_term_memory_items m",
    "prune_replay_samples": "SELECT memgov.prune_replay_samples(1)",
    "sample_rate": "SELECT memgov.sample_rate('acme')",
}


@pytest.mark.parametrize("call", sorted(INTERNAL_CALLS))
@pytest.mark.parametrize("role", ["writer", "reviewer"])
def test_x_internal_functions_refuse_direct_calls(su, writer, login, logins, role, call):
    held(writer, su)
    seed(su, "allowed")
    conn = login(getattr(logins, role))
    with refused(su, "42501"):
        conn.execute(INTERNAL_CALLS[call])


def test_x_copy_of_a_secret_is_denied(su, writer):
    with refused(su, "MG403", "0A000"):
        with writer.cursor().copy(
            "COPY memgov.long_term_memory_items (org_id, category, fact_text, source, confidence) FROM STDIN"
        ) as copy:
            copy.write_row(("acme", "user_fact", "password: hunter2hunter2", "agent_extracted", "0.9"))


@pytest.mark.parametrize("source", ["user_confirmed", "system_rule"])
@pytest.mark.parametrize("path", ["insert", "update"])
def test_x_a_writer_cannot_claim_a_trusted_source(su, writer, source, path):
    memory_id = seed(su, "allowed")
    with refused(su, "MG403"):
        if path == "insert":
            insert(writer, item("held", source=source))
        else:
            writer.execute(
                "UPDATE memgov.long_term_memory_items SET source = %s WHERE memory_id = %s", (source, memory_id)
            )


@pytest.mark.parametrize(
    "column,value",
    [("status", "active"), ("created_at", "2099-01-01"), ("expires_at", "2099-01-01"), ("decision_id", 1),
     ("policy_version", "forged"), ("last_confirmed_at", "2099-01-01"), ("low_confidence_since", None),
     ("updated_at", "2099-01-01")],
)  # fmt: skip
@pytest.mark.parametrize("path", ["insert", "update"])
def test_x_a_writer_cannot_set_engine_columns(su, writer, column, value, path):
    memory_id = seed(su, "allowed")
    with refused(su, "42501"):
        if path == "insert":
            insert(writer, item("held") | {column: value})
        else:
            writer.execute(
                sql.SQL("UPDATE memgov.long_term_memory_items SET {} = %s WHERE memory_id = %s").format(
                    sql.Identifier(column)
                ),
                (value, memory_id),
            )


def test_x_remember_ignores_engine_columns_in_the_item(su, writer):
    forged = item("held", status="active", created_at="2099-01-01T00:00:00Z", decision_id=1,
                  policy_version="forged", expires_at="2099-01-01T00:00:00Z")  # fmt: skip
    outcome = writer.execute("SELECT memgov.remember(%s)", (as_json(forged),)).fetchone()[0]
    row = memory(su, uuid.UUID(outcome["memory_id"]))
    assert row["status"] == "pending_approval" and row["policy_version"] == GLOBAL_VERSION
    assert row["created_at"].year < 2099 and row["expires_at"] is None


@pytest.mark.parametrize("setting", ["memgov.govern_as=memgov_admin", "memgov.on_deny=skip", "memgov.capture=on",
                                     'memgov.last_outcome={"action": "allow"}'])  # fmt: skip
def test_x_engine_settings_from_the_session_let_nothing_through(su, writer, logins, setting):
    name, value = setting.split("=", 1)
    writer.execute("SELECT set_config(%s, %s, false)", (name, value))
    hold = seed(su, "legal")
    items_before = su.execute("SELECT to_jsonb(m)::text FROM memgov.long_term_memory_items m ORDER BY 1").fetchall()
    for attack in (lambda: insert(writer, item("denied")), lambda: writer.execute("SELECT memgov.forget(%s)", (hold,)),
                   lambda: insert(writer, item("denied", org=OTHER))):  # fmt: skip
        try:
            attack()
        except psycopg.Error:
            pass
    assert (
        su.execute("SELECT to_jsonb(m)::text FROM memgov.long_term_memory_items m ORDER BY 1").fetchall()
        == items_before
    )
    assert su.execute("SELECT count(*) FROM memgov.decision_log WHERE action <> 'deny' OR login <> %s",
                      (logins.writer,)).fetchone() == (0,)  # fmt: skip


SHADOWS = [
    ("FUNCTION atk.current_setting(text)", "text"),
    ("FUNCTION atk.current_setting(text, boolean)", "text"),
    ("FUNCTION atk.now()", "timestamptz"),
    ("FUNCTION atk.pg_has_role(text, oid, text)", "boolean"),
    ("FUNCTION atk.pg_has_role(name, text, text)", "boolean"),
    ("FUNCTION atk.set_config(text, text, boolean)", "text"),
    ("FUNCTION atk.octet_length(text)", "integer"),
    ("FUNCTION atk.md5(text)", "text"),
    ("FUNCTION atk.gen_random_uuid()", "uuid"),
    ("FUNCTION atk.pg_notify(text, text)", "void"),
    ("FUNCTION atk.lower(text)", "text"),
    ("FUNCTION atk.shadow_eq(text, text)", "boolean"),
]


def test_x_search_path_shadows_are_never_called_by_the_engine(su, login, logins, reviewer, memgov_dsn):
    su.execute(sql.SQL("CREATE SCHEMA atk AUTHORIZATION {}").format(sql.Identifier(logins.creator)))
    try:
        creator = login(logins.creator)
        for signature, returns in SHADOWS:
            creator.execute(
                f"CREATE {signature} RETURNS {returns} LANGUAGE plpgsql AS $$ BEGIN"
                f" RAISE EXCEPTION 'SHADOW {signature.split('.')[1]} called as %', current_user; END $$"
            )
        creator.execute("CREATE OPERATOR atk.= (LEFTARG = text, RIGHTARG = text, FUNCTION = atk.shadow_eq)")
        creator.execute("GRANT USAGE ON SCHEMA atk TO PUBLIC")
        for conn in (creator, reviewer):
            conn.execute("SET search_path = atk, pg_catalog, public")
        stored, status = insert(creator, item("allowed")).fetchone()
        assert status == "active"
        pending, status = insert(creator, item("held")).fetchone()
        assert status == "pending_approval"
        quarantined(creator, su)
        creator.execute("SELECT memgov.remember(%s)", (as_json(item("allowed")),))
        with refused(su, "MG403"):
            insert(creator, item("denied"))
        with refused(su, "42501"):
            insert(creator, item("allowed", org=OTHER))
        creator.execute("SELECT memgov.evaluate(%s)", (as_json(item("held")),))
        creator.execute('SELECT * FROM memgov.search(\'{"text": "tea"}\')')
        creator.execute("SELECT * FROM memgov.get(%s)", (stored,))
        creator.execute("SELECT * FROM memgov.long_term_memory_items")
        reviewer.execute("SELECT * FROM memgov.long_term_memory_items")
        creator.execute("SELECT memgov.forget(%s)", (stored,))
        reviewer.execute("SELECT memgov.approve(%s)", (request_of(su, pending),))
        reviewer.execute("SELECT memgov.confirm(%s)", (pending,))
        reviewer.execute("SELECT memgov.edit(%s, 'likes oolong')", (pending,))
    finally:
        su.execute("DROP SCHEMA atk CASCADE")


def test_x_pg_temp_tables_named_like_memgov_tables_are_never_used(su, writer, reviewer):
    for conn in (writer, reviewer):
        for table in memgov_tables(su):
            conn.execute(sql.SQL("CREATE TEMP TABLE {} (x int)").format(sql.Identifier(table)))
    stored = insert(writer, item("allowed")).fetchone()[0]
    pending = insert(writer, item("held")).fetchone()[0]
    _, quarantine_id = quarantined(writer, su)
    writer.execute("SELECT memgov.remember(%s)", (as_json(item("denied")),))
    writer.execute("SELECT memgov.forget(%s)", (stored,))
    reviewer.execute("SELECT memgov.approve(%s)", (request_of(su, pending),))
    reviewer.execute("SELECT memgov.release_quarantine(%s)", (quarantine_id,))
    reviewer.execute("SELECT memgov.edit(%s, 'likes oolong')", (pending,))
    for conn in (writer, reviewer):
        for table in memgov_tables(su):
            assert conn.execute(
                sql.SQL("SELECT count(*) FROM pg_temp.{}").format(sql.Identifier(table))
            ).fetchone() == (0,)
