"""Feedback: confirm, reject, edit, forget and apply_retention, as the
roles that call them, in real PostgreSQL. Confidence is exact numeric; every
call is a row in memgov.feedback_events; concurrent calls never lose an update."""

from __future__ import annotations

import threading
import uuid
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from psycopg import errors

from memgov_pg.compiler import compile_policy
from memgov_pg.policy import load_policy
from tests.attack_helpers import AsRole, connect_as_role
from tests.clean_slate import fresh
from tests.cli_helpers import raises_sqlstate
from tests.waiting import blocked_by, join, wait_for

POLICY = """
version: "{version}"
defaults: {{on_policy_miss: allow}}
sources: {{user_confirmed: ["*"]}}
feedback: {{{feedback}}}
rules:
  - {{id: block-secrets, priority: 10, when: [{{field: content.contains_secret, operator: eq, value: true}}],
      action: deny, reason_codes: [SECRET_DETECTED]}}
  - {{id: hold-words, priority: 20, when: [{{field: fact_text, operator: contains, value: HOLDME}}],
      action: require_approval}}
"""
ORG = "acme"


def deploy(conn: psycopg.Connection[Any], version: str = "1.0.0", feedback: str = "", tenant: str = "*") -> None:
    policy = load_policy(POLICY.format(version=version, feedback=feedback))
    conn.execute(compile_policy(policy, tenant).install_sql())


@pytest.fixture
def su(db_conn):
    """Superuser connection; every test starts from empty tables and the default feedback settings."""
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


def remember(conn: psycopg.Connection[Any], text: str = "likes tea", confidence: str = "0.6",
             org: str = ORG, **extra: Any) -> uuid.UUID:  # fmt: skip
    row = {"org_id": org, "category": "user_fact", "fact_text": text, "source": "agent_extracted",
           "confidence": Decimal(confidence)} | extra  # fmt: skip
    cols = ", ".join(row)
    params = ", ".join(f"%({k})s" for k in row)
    return conn.execute(
        f"INSERT INTO memgov.long_term_memory_items ({cols}) VALUES ({params}) RETURNING memory_id", row
    ).fetchone()[0]


def memory(su: psycopg.Connection[Any], memory_id: uuid.UUID) -> dict[str, Any] | None:
    cur = su.execute("SELECT * FROM memgov.long_term_memory_items WHERE memory_id = %s", (memory_id,))
    row = cur.fetchone()
    return None if row is None else dict(zip([c.name for c in cur.description], row, strict=True))


def events(su: psycopg.Connection[Any], memory_id: uuid.UUID) -> list[tuple[Any, ...]]:
    return su.execute(
        "SELECT kind, confidence_before, confidence_after, actor FROM memgov.feedback_events"
        " WHERE memory_id = %s ORDER BY event_id",
        (memory_id,),
    ).fetchall()


def call(conn: psycopg.Connection[Any], function: str, memory_id: uuid.UUID, *args: Any) -> dict[str, Any]:
    placeholders = ", ".join(["%s"] * (1 + len(args)))
    return conn.execute(f"SELECT memgov.{function}({placeholders})", (memory_id, *args)).fetchone()[0]


# -- confirm ------------------------------------------------------------------------


def test_confirm_adds_exactly_the_delta_and_records_the_event(writer, reviewer, su):
    memory_id = remember(writer, confidence="0.6")
    before = su.execute("SELECT now()").fetchone()[0]
    result = call(reviewer, "confirm", memory_id)
    row = memory(su, memory_id)
    assert row["confidence"] == Decimal("0.700")  # exact: not 0.7000000000000001
    assert row["last_confirmed_at"] >= before
    assert result["confidence_before"] == 0.6 and result["confidence_after"] == 0.7
    assert result["outcome"] == "confirmed"
    assert events(su, memory_id) == [("confirm", Decimal("0.600"), Decimal("0.700"), "memgov_reviewer")]
    at, org = su.execute("SELECT at, org_id FROM memgov.feedback_events").fetchone()
    assert at >= before and org == ORG


def test_confirm_and_reject_clamp_to_zero_and_one(writer, reviewer, su):
    high = remember(writer, confidence="0.95")
    low = remember(writer, confidence="0.1")
    call(reviewer, "confirm", high)
    call(reviewer, "reject", low)
    assert memory(su, high)["confidence"] == Decimal("1.000")
    assert memory(su, low)["confidence"] == Decimal("0.000")  # reject_delete_below 0.0: never deleted
    call(reviewer, "confirm", high)
    assert events(su, high)[-1][1:3] == (Decimal("1.000"), Decimal("1.000"))


def test_deltas_come_from_the_tenants_active_policy(writer, reviewer, su, memgov_dsn):
    deploy(su, "2.0.0", "confirm_delta: 0.25, reject_delta: -0.05, edit_confidence: 0.55", tenant=ORG)
    memory_id = remember(writer, confidence="0.5")
    call(reviewer, "confirm", memory_id)
    assert memory(su, memory_id)["confidence"] == Decimal("0.750")
    call(reviewer, "reject", memory_id)
    assert memory(su, memory_id)["confidence"] == Decimal("0.700")
    call(reviewer, "edit", memory_id, "likes green tea")
    assert memory(su, memory_id)["confidence"] == Decimal("0.550")
    # another tenant keeps the global defaults
    with connect_as_role(memgov_dsn, "memgov_writer", "beta") as beta_writer, \
         connect_as_role(memgov_dsn, "memgov_reviewer", "beta") as beta_reviewer:  # fmt: skip
        other = remember(beta_writer, confidence="0.5", org="beta")
        call(beta_reviewer, "confirm", other)
    assert memory(su, other)["confidence"] == Decimal("0.600")


def test_confirm_on_a_pending_memory_approves_it(writer, reviewer, su):
    memory_id = remember(writer, "HOLDME likes jazz", confidence="0.6")
    assert memory(su, memory_id)["status"] == "pending_approval"
    result = call(reviewer, "confirm", memory_id)
    assert result["outcome"] == "approved"
    row = memory(su, memory_id)
    assert row["status"] == "active" and row["confidence"] == Decimal("0.700")
    request = su.execute(
        "SELECT status, decided_by FROM memgov.approval_requests WHERE memory_id = %s", (memory_id,)
    ).fetchone()
    assert request == ("approved", "memgov_reviewer")


# -- reject --------------------------------------------------------------------------


def test_reject_lowers_confidence(writer, reviewer, su):
    memory_id = remember(writer, confidence="0.9")
    result = call(reviewer, "reject", memory_id)
    assert result["outcome"] == "lowered"
    assert memory(su, memory_id)["confidence"] == Decimal("0.600")
    assert events(su, memory_id) == [("reject", Decimal("0.900"), Decimal("0.600"), "memgov_reviewer")]


def test_reject_deletes_below_reject_delete_below(writer, reviewer, su):
    deploy(su, "2.0.0", "reject_delete_below: 0.2")
    stays = remember(writer, "likes tea", confidence="0.5")  # 0.5 - 0.3 = 0.2: not below 0.2
    goes = remember(writer, "likes secret gardens", confidence="0.4")  # 0.1 < 0.2
    assert call(reviewer, "reject", stays)["outcome"] == "lowered"
    result = call(reviewer, "reject", goes)
    assert result["outcome"] == "deleted" and result["confidence_after"] == 0.1
    assert memory(su, stays)["confidence"] == Decimal("0.200")
    assert memory(su, goes) is None
    logged = su.execute(
        "SELECT memory_ids, org_id, reason, rule_id, policy_version, memory_count FROM memgov.deletion_log"
    ).fetchall()
    assert logged == [([goes], ORG, "rejected", None, "2.0.0", 1)]
    assert events(su, goes) == [("reject", Decimal("0.400"), Decimal("0.100"), "memgov_reviewer")]


def test_reject_on_a_pending_memory_refuses_it(writer, reviewer, su):
    memory_id = remember(writer, "HOLDME likes opera", confidence="0.9")
    result = call(reviewer, "reject", memory_id)
    assert result["outcome"] == "refused"
    assert memory(su, memory_id) is None
    request = su.execute(
        "SELECT status, decided_by FROM memgov.approval_requests WHERE memory_id = %s", (memory_id,)
    ).fetchone()
    assert request == ("denied", "memgov_reviewer")
    assert events(su, memory_id) == [("reject", Decimal("0.900"), None, "memgov_reviewer")]


# -- edit ----------------------------------------------------------------------------


def test_edit_sets_text_and_confidence_and_is_decided_as_an_update(writer, reviewer, su):
    memory_id = remember(writer, "likes tea", confidence="0.2")
    result = call(reviewer, "edit", memory_id, "likes green tea")
    assert result["action"] == "allow" and result["kind"] == "edit"
    row = memory(su, memory_id)
    assert (row["fact_text"], row["confidence"]) == ("likes green tea", Decimal("0.800"))
    decision = su.execute(
        "SELECT operation, action, actor FROM memgov.decision_log WHERE decision_id = %s", (result["decision_id"],)
    ).fetchone()
    assert decision == ("update", "allow", "memgov_reviewer")
    assert events(su, memory_id) == [("edit", Decimal("0.200"), Decimal("0.800"), "memgov_reviewer")]


def test_edit_with_a_secret_is_denied_and_the_old_text_stays(writer, reviewer, su):
    memory_id = remember(writer, "uses the staging API", confidence="0.6")
    with raises_sqlstate("MG403") as info:
        call(reviewer, "edit", memory_id, "api_key=sk-live-0123456789abcdef0123")
    assert "block-secrets" in str(info.value)
    row = memory(su, memory_id)
    assert (row["fact_text"], row["confidence"]) == ("uses the staging API", Decimal("0.600"))
    assert events(su, memory_id) == []


def test_edit_the_policy_holds_leaves_the_row_until_approved(writer, reviewer, su):
    memory_id = remember(writer, "likes tea", confidence="0.6")
    result = call(reviewer, "edit", memory_id, "HOLDME likes coffee")
    assert result["action"] == "require_approval" and result["request_id"]
    row = memory(su, memory_id)
    assert (row["fact_text"], row["confidence"]) == ("likes tea", Decimal("0.600"))
    payload = su.execute(
        "SELECT operation, payload ->> 'fact_text' FROM memgov.approval_requests WHERE request_id = %s",
        (result["request_id"],),
    ).fetchone()
    assert payload == ("update", "HOLDME likes coffee")


def test_edit_refuses_null_text(writer, reviewer):
    memory_id = remember(writer)
    with raises_sqlstate("22004"):
        call(reviewer, "edit", memory_id, None)


# -- forget and apply_retention ------------------------------------------------------


def test_writers_may_forget(writer, su):
    memory_id = remember(writer)
    result = call(writer, "forget", memory_id)
    assert result["action"] == "allow"
    assert memory(su, memory_id) is None
    assert events(su, memory_id) == [("forget", Decimal("0.600"), None, "memgov_writer")]
    assert su.execute(
        "SELECT operation, actor FROM memgov.decision_log WHERE decision_id = %s", (result["decision_id"],)
    ).fetchone() == ("forget", "memgov_writer")


def test_apply_retention_deletes_one_due_memory_and_keeps_the_rest(writer, su):
    due = remember(writer, "stale fact", retention_policy="ttl_7d")
    fresh = remember(writer, "fresh fact", retention_policy="ttl_7d")
    permanent = remember(writer, "kept forever")
    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute(
            "UPDATE memgov.long_term_memory_items SET created_at = now() - interval '400 days'"
            " WHERE memory_id = ANY(%s)",
            ([due, permanent],),
        )
    assert call(writer, "apply_retention", due) == {
        "memory_id": str(due), "deleted": True, "reason": "ttl", "rule_id": None}  # fmt: skip
    assert call(writer, "apply_retention", fresh)["deleted"] is False
    assert call(writer, "apply_retention", permanent)["deleted"] is False
    assert memory(su, due) is None and memory(su, fresh) and memory(su, permanent)
    assert su.execute("SELECT memory_ids, reason FROM memgov.deletion_log").fetchall() == [([due], "ttl")]


# -- who may give feedback, and where ------------------------------------------------------


@pytest.mark.parametrize(("function", "args"), [("confirm", ()), ("reject", ()), ("edit", ("new text",))])
def test_writers_cannot_confirm_reject_or_edit(writer, su, function, args):
    memory_id = remember(writer, confidence="0.6")
    with pytest.raises(errors.InsufficientPrivilege):
        call(writer, function, memory_id, *args)
    row = memory(su, memory_id)
    assert (row["fact_text"], row["confidence"]) == ("likes tea", Decimal("0.600"))


@pytest.mark.parametrize("function", ["confirm", "reject", "edit", "forget", "apply_retention"])
def test_feedback_on_another_tenants_memory_is_mg404(writer, memgov_dsn, su, function):
    memory_id = remember(writer, confidence="0.6")
    role = "memgov_writer" if function in ("forget", "apply_retention") else "memgov_reviewer"
    args = ("new text",) if function == "edit" else ()
    for org in ("beta", None):  # another tenant, and memgov.org_id unset
        with connect_as_role(memgov_dsn, role, org) as other:
            with raises_sqlstate("MG404") as info:
                call(other, function, memory_id, *args)
        assert str(memory_id) in str(info.value)
    assert memory(su, memory_id)["confidence"] == Decimal("0.600")
    assert events(su, memory_id) == []


@pytest.mark.parametrize("function", ["confirm", "reject", "edit", "forget", "apply_retention"])
def test_feedback_on_a_missing_memory_is_mg404(reviewer, function):
    args = ("new text",) if function == "edit" else ()
    with raises_sqlstate("MG404"):
        call(reviewer, function, uuid.uuid4(), *args)


def test_memgov_admin_works_across_tenants(writer, memgov_dsn, su):
    memory_id = remember(writer, confidence="0.6")
    su.execute("DROP ROLE IF EXISTS feedback_admin_login")
    su.execute("CREATE ROLE feedback_admin_login LOGIN IN ROLE memgov_admin")
    try:
        with connect_as_role(memgov_dsn, "feedback_admin_login", None) as other:
            assert call(other, "confirm", memory_id)["confidence_after"] == 0.7
        assert events(su, memory_id)[0][3] == "feedback_admin_login"
    finally:
        su.execute("DROP OWNED BY feedback_admin_login")
        su.execute("DROP ROLE feedback_admin_login")


def test_reviewers_see_feedback_events_of_their_tenant_only(writer, reviewer, memgov_dsn, su):
    memory_id = remember(writer)
    call(reviewer, "confirm", memory_id)
    assert reviewer.execute("SELECT count(*) FROM memgov.feedback_events").fetchone()[0] == 1
    with connect_as_role(memgov_dsn, "memgov_reviewer", "beta") as other:
        assert other.execute("SELECT count(*) FROM memgov.feedback_events").fetchone()[0] == 0


# -- concurrency ---------------------------------------------------------------------------


def waiting_on_locks(su: psycopg.Connection[Any], pids: list[int]) -> int:
    return su.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s) AND wait_event_type = 'Lock'", (pids,)
    ).fetchone()[0]


def test_concurrent_confirms_never_lose_an_update(writer, su, memgov_dsn):
    """N sessions confirm the same memory at once while a first one holds its row lock:
    each waits, then applies its delta to the value the previous one committed."""
    n = 6
    memory_id = remember(writer, confidence="0.1")
    sessions = [connect_as_role(memgov_dsn, "memgov_reviewer") for _ in range(n)]
    try:
        first, others = sessions[0], sessions[1:]
        first.execute("BEGIN")
        call(first, "confirm", memory_id)  # holds the row lock until COMMIT
        barrier = threading.Barrier(len(others))
        failures: list[BaseException] = []

        def confirm(conn: psycopg.Connection[Any]) -> None:
            try:
                barrier.wait()
                call(conn, "confirm", memory_id)
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=confirm, args=(c,)) for c in others]
        for t in threads:
            t.start()
        pids = [c.info.backend_pid for c in others]
        wait_for(lambda: waiting_on_locks(su, pids) == len(others), "the other confirms to wait on the row lock")
        first.execute("COMMIT")
        for t in threads:
            join(t, "a confirm")
        assert not failures, failures
    finally:
        for conn in sessions:
            conn.close()
    assert memory(su, memory_id)["confidence"] == Decimal("0.700")  # 0.1 + 6 * 0.1, exactly
    chain = events(su, memory_id)
    assert len(chain) == n
    assert [e[1] for e in chain] == [Decimal("0.1") + Decimal("0.1") * i for i in range(n)]
    assert all(after == before + Decimal("0.1") for _, before, after, _ in chain)


def test_concurrent_confirms_from_many_connections_at_once(writer, su, memgov_dsn):
    n = 8
    memory_id = remember(writer, confidence="0.0")
    sessions = [connect_as_role(memgov_dsn, "memgov_reviewer") for _ in range(n)]
    barrier = threading.Barrier(n)
    failures: list[BaseException] = []

    def confirm(conn: psycopg.Connection[Any]) -> None:
        try:
            barrier.wait()
            call(conn, "confirm", memory_id)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=confirm, args=(c,)) for c in sessions]
    try:
        for t in threads:
            t.start()
        for t in threads:
            join(t, "a confirm")
    finally:
        for conn in sessions:
            conn.close()
    assert not failures, failures
    assert memory(su, memory_id)["confidence"] == Decimal("0.800")
    assert len(events(su, memory_id)) == n


def test_a_reject_that_waits_on_a_forget_finds_the_memory_gone(writer, reviewer, su):
    memory_id = remember(writer)
    writer.execute("BEGIN")
    call(writer, "forget", memory_id)
    outcome: list[BaseException | dict[str, Any]] = []
    thread = threading.Thread(target=lambda: outcome.append(_try(lambda: call(reviewer, "reject", memory_id))))
    thread.start()
    wait_for(lambda: blocked_by(su, reviewer.info.backend_pid, writer.info.backend_pid),
             "the reject to wait for the forget's row lock")  # fmt: skip
    writer.execute("COMMIT")
    join(thread, "the reject")
    assert isinstance(outcome[0], psycopg.Error) and outcome[0].sqlstate == "MG404"


def _try(fn: Any) -> Any:
    try:
        return fn()
    except psycopg.Error as exc:
        return exc
