"""memgov_pg.sqlalchemy and memgov_pg.errors with real writer and reviewer logins: the function
wrappers return typed decisions (a held or quarantined write is a result, never a FlushError),
notices become the session's decisions, and database errors become memgov's exceptions."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, select, update
from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import FlushError, StaleDataError

from memgov_pg import errors
from memgov_pg.errors import (
    ConflictError,
    NotFoundError,
    NotPermittedError,
    PolicyDeniedError,
    QuarantinedError,
    RecallHeldError,
    from_dbapi_error,
)
from memgov_pg.models import MemoryItem, QuarantineEntry, Source, Status, memory_items
from memgov_pg.sqlalchemy import (
    Decision,
    RecalledMemory,
    decisions,
    execute,
    get,
    install,
    memgov_apply_retention,
    memgov_approve,
    memgov_confirm,
    memgov_deny,
    memgov_edit,
    memgov_evaluate,
    memgov_explain,
    memgov_forget,
    memgov_forget_where,
    memgov_purge_quarantine,
    memgov_reject,
    memgov_release_quarantine,
    memgov_remember,
    memgov_search,
    search,
    set_tenant,
)
from tests.attack_helpers import ORG, READ_POLICY, TEXTS, Logins, deploy_policy
from tests.sqlalchemy_helpers import login_engine, reset


@pytest.fixture
def su(db_conn: psycopg.Connection[Any], logins: Logins) -> psycopg.Connection[Any]:
    reset(db_conn)
    return db_conn


@pytest.fixture
def writer(su: psycopg.Connection[Any], memgov_dsn: str, logins: Logins) -> Iterator[Engine]:
    engine = install(login_engine(memgov_dsn, logins.writer), org_id=ORG)
    yield engine
    engine.dispose()


@pytest.fixture
def reviewer(su: psycopg.Connection[Any], memgov_dsn: str, logins: Logins) -> Iterator[Engine]:
    engine = install(login_engine(memgov_dsn, logins.reviewer), org_id=ORG)
    yield engine
    engine.dispose()


def memory(kind: str = "allowed", **extra: Any) -> MemoryItem:
    category, text, confidence = TEXTS[kind]
    values: dict[str, Any] = {"org_id": ORG, "category": category, "fact_text": text,
                              "source": Source.AGENT_EXTRACTED, "confidence": Decimal(confidence)}  # fmt: skip
    if kind == "quarantined":
        values["context_source"] = "custom"
    return MemoryItem(**(values | extra))


def count(su: psycopg.Connection[Any], table: str) -> int:
    row = su.execute(f"SELECT count(*) FROM memgov.{table}").fetchone()
    assert row is not None
    return int(row[0])


# -- the wrappers -------------------------------------------------------------------------------


def test_a_held_insert_through_remember_is_a_decision_with_its_request(
    writer: Engine, su: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    with Session(writer) as session, caplog.at_level(logging.INFO, logger="memgov_pg"):
        decision = session.scalar(memgov_remember(memory("held")))
        session.commit()
    assert isinstance(decision, Decision)
    assert decision.action == "require_approval" and decision.applied == "require_approval"
    assert decision.matched_rule_ids == ("hold-uncertain-preferences",)
    assert decision.reason_codes == ("LOW_CONFIDENCE_PREFERENCE",)
    assert isinstance(decision.request_id, uuid.UUID) and isinstance(decision.memory_id, uuid.UUID)
    # the notice, as the session's decision and as a log record
    (noticed,) = decisions(session)
    assert noticed.sqlstate == "MG201" and noticed.request_id == decision.request_id
    records = [r for r in caplog.records if getattr(r, "memgov_decision", None) is not None]
    assert [r.memgov_decision.request_id for r in records] == [decision.request_id]  # type: ignore[attr-defined]
    assert "held for approval" in records[0].getMessage()
    row = su.execute(
        "SELECT status FROM memgov.long_term_memory_items WHERE memory_id = %s", (decision.memory_id,)
    ).fetchone()
    assert row == ("pending_approval",)


def test_a_core_connection_has_its_own_decisions(writer: Engine) -> None:
    with writer.connect() as conn:
        decision = conn.execute(memgov_remember(memory("held"))).scalar_one()
        conn.commit()
        assert [d.request_id for d in decisions(conn)] == [decision.request_id]
    with writer.connect() as conn:
        assert decisions(conn) == []  # a fresh list per checkout


def test_a_quarantined_insert_through_remember_is_a_decision(writer: Engine, su: psycopg.Connection[Any]) -> None:
    with Session(writer) as session:
        item = {"org_id": ORG, "category": "user_fact", "fact_text": TEXTS["quarantined"][1],
                "source": "agent_extracted", "confidence": Decimal("0.9"), "context_source": "custom"}  # fmt: skip
        decision = session.scalar(memgov_remember(item))
        session.commit()
    assert decision is not None and decision.action == "quarantine"
    assert decision.quarantine_id is not None
    assert [d.sqlstate for d in decisions(session)] == ["MG202"]
    with pytest.raises(QuarantinedError):
        decision.raise_for()
    assert count(su, "long_term_memory_items") == 0 and count(su, "quarantine") == 1


def test_a_denied_remember_is_returned_not_raised(writer: Engine, su: psycopg.Connection[Any]) -> None:
    with Session(writer) as session:
        decision = session.scalar(memgov_remember(memory("denied")))
        session.commit()
    assert decision is not None and decision.action == "deny" and decision.matched_rule_ids == ("block-secrets",)
    with pytest.raises(PolicyDeniedError) as info:
        decision.raise_for()
    assert info.value.rule_ids == ["block-secrets"]
    assert count(su, "long_term_memory_items") == 0 and count(su, "decision_log") == 1


def test_the_review_and_feedback_wrappers(writer: Engine, reviewer: Engine, su: psycopg.Connection[Any]) -> None:
    with Session(writer) as w:
        held = w.scalar(memgov_remember(memory("held")))
        held2 = w.scalar(memgov_remember(memory("held", fact_text="likes coffee")))
        quarantined = w.scalar(memgov_remember(memory("quarantined")))
        quarantined2 = w.scalar(memgov_remember(memory("quarantined", fact_text="mail me at x@example.com")))
        stored = w.scalar(memgov_remember(memory("allowed")))
        w.commit()
    assert held and held2 and quarantined and quarantined2 and stored
    assert stored.action == "allow" and stored.memory_id is not None

    with Session(reviewer) as r:
        approved = r.scalar(memgov_approve(held.request_id or "", "fine"))
        assert approved is not None and approved.status == "approved" and approved.request_id == held.request_id
        # the decision taken (the write is applied), and what the policy said on deciding it again
        assert approved.decision is not None and approved.decision.action == "allow"
        assert approved.policy_action == "require_approval" and approved.memory_id == held.memory_id
        denied = r.scalar(memgov_deny(held2.request_id or ""))
        assert denied is not None and denied.status == "denied" and denied.decision is None

        released = r.scalar(memgov_release_quarantine(quarantined.quarantine_id or ""))
        assert released is not None and released.status == "released" and released.memory_id == quarantined.memory_id
        purged = r.scalar(memgov_purge_quarantine(quarantined2.quarantine_id or ""))
        assert purged is not None and purged.status == "purged"

        confirmed = r.scalar(memgov_confirm(stored.memory_id))
        assert confirmed is not None and confirmed.kind == "confirm" and confirmed.outcome == "confirmed"
        assert confirmed.confidence_before == Decimal("0.9") and confirmed.confidence_after == Decimal("1.0")
        rejected = r.scalar(memgov_reject(stored.memory_id))
        assert rejected is not None and rejected.outcome == "lowered"
        edited = r.scalar(memgov_edit(stored.memory_id, "likes oolong tea"))
        assert edited is not None and edited.kind == "edit" and edited.outcome == "allow"
        assert edited.decision is not None and edited.decision.action == "allow"
        r.commit()

    with Session(writer) as w:
        forgotten = w.scalar(memgov_forget(stored.memory_id))
        w.commit()
    assert forgotten is not None and forgotten.action == "allow" and forgotten.memory_id == stored.memory_id
    statuses = su.execute("SELECT memory_id, status FROM memgov.long_term_memory_items ORDER BY 2").fetchall()
    assert sorted(statuses) == sorted([(held.memory_id, "active"), (quarantined.memory_id, "active")])


def test_forget_where_returns_the_counts(writer: Engine, su: psycopg.Connection[Any]) -> None:
    with Session(writer) as w:
        for kind in ("allowed", "allowed", "held"):
            w.scalar(memgov_remember(memory(kind, subject_id="user-42")))
        w.commit()
    with Session(writer) as w:
        dry = w.scalar(memgov_forget_where({"org_id": ORG, "subject_id": "user-42"}, dry_run=True))
        done = w.scalar(memgov_forget_where({"org_id": ORG, "subject_id": "user-42"}))
        w.commit()
    counts = {"forgotten": 2, "held": 0, "denied": 0, "pending": 1}
    assert dry == counts | {"dry_run": True} and done == counts | {"dry_run": False}
    assert count(su, "long_term_memory_items") == 1


def test_the_dry_runs_and_apply_retention(writer: Engine, reviewer: Engine, su: psycopg.Connection[Any]) -> None:
    """memgov_evaluate / memgov_explain decide and write nothing; memgov_apply_retention applies the
    sweep's rules to one memory (a fresh one is kept), for a writer and for a reviewer."""
    logged = count(su, "decision_log")
    with Session(writer) as w:
        decision = w.scalar(memgov_evaluate(memory("denied")))
        explained = w.scalar(memgov_explain(memory("held"), "update"))
        w.commit()
    assert isinstance(decision, Decision) and decision.action == "deny"
    assert decision.matched_rule_ids == ("block-secrets",)
    assert explained is not None and explained["action"] == "require_approval"
    assert explained["matched_rule_ids"] == ["hold-uncertain-preferences"]
    assert "hold-uncertain-preferences" in {r["rule_id"] for r in explained["rules"] if r["matched"]}
    assert count(su, "decision_log") == logged and count(su, "long_term_memory_items") == 0
    with Session(writer) as w:
        stored = execute(w, memgov_remember(memory("allowed")))
        w.commit()
        kept = execute(w, memgov_apply_retention(stored.memory_id))
        w.commit()
    assert kept == {"memory_id": str(stored.memory_id), "deleted": False, "reason": None, "rule_id": None}
    with Session(reviewer) as r:
        assert execute(r, memgov_apply_retention(stored.memory_id))["deleted"] is False
        with pytest.raises(NotFoundError):
            execute(r, memgov_apply_retention(uuid.uuid4()))
    assert count(su, "long_term_memory_items") == 1


def test_execute_raises_memgov_exceptions(writer: Engine, reviewer: Engine) -> None:
    with Session(writer) as w:
        stored = execute(w, memgov_remember(memory("allowed")))
        w.commit()
    with Session(reviewer) as r:
        with pytest.raises(PolicyDeniedError) as denied:
            execute(r, memgov_edit(stored.memory_id, "password: hunter2hunter2"))
        assert denied.value.rule_ids == ["block-secrets"] and denied.value.reason_codes == ["SECRET_DETECTED"]
        assert denied.value.decision["action"] == "deny"
        r.rollback()
        with pytest.raises(NotFoundError) as missing:
            execute(r, memgov_approve(uuid.uuid4()))
        assert missing.value.sqlstate == "MG404"
        r.rollback()
    with Session(writer) as w, pytest.raises(NotPermittedError):
        execute(w, memgov_approve(uuid.uuid4()))  # a writer may not decide requests


def test_a_decided_request_is_a_conflict(writer: Engine, reviewer: Engine) -> None:
    with Session(writer) as w:
        held = execute(w, memgov_remember(memory("held")))
        w.commit()
    with Session(reviewer) as r:
        execute(r, memgov_deny(held.request_id))
        r.commit()
        with pytest.raises(ConflictError) as info:
            execute(r, memgov_deny(held.request_id))
        assert info.value.sqlstate == "MG409"


# -- what the ORM user sees ------------------------------------------------------------------------


def test_a_held_orm_insert_is_stored_pending_with_its_notice(writer: Engine, su: psycopg.Connection[Any]) -> None:
    """The flush's INSERT ... RETURNING reads the pending row back; after the commit only
    reviewers see it, so the writer's object cannot be refreshed."""
    with Session(writer, expire_on_commit=False) as session:
        item = memory("held")
        session.add(item)
        session.flush()
        assert item.status is Status.PENDING_APPROVAL
        session.commit()
        (noticed,) = decisions(session)
        assert noticed.action == "require_approval" and noticed.memory_id == item.memory_id
        assert session.scalar(select(MemoryItem).where(MemoryItem.memory_id == item.memory_id)) is None
    row = su.execute("SELECT status FROM memgov.long_term_memory_items WHERE memory_id = %s", (item.memory_id,))
    assert row.fetchone() == ("pending_approval",)


def test_a_quarantined_orm_insert_is_a_flush_error_the_wrapper_avoids(
    writer: Engine, su: psycopg.Connection[Any]
) -> None:
    """The trigger drops a quarantined row (RETURN NULL): the INSERT ... RETURNING returns no row,
    which the ORM reports as an error of its own; the quarantine entry exists only if the
    transaction commits, and the ORM rolls it back. Use memgov_remember for such writes."""
    with Session(writer) as session:
        session.add(memory("quarantined"))
        with pytest.raises(FlushError, match="did not produce a new primary key") as info:
            session.commit()
        assert from_dbapi_error(info.value) is None
        # the notice came before the error: the session saw the decision
        assert [d.sqlstate for d in decisions(session)] == ["MG202"]
        session.rollback()
    assert count(su, "quarantine") == 0 and count(su, "long_term_memory_items") == 0


def test_an_orm_delete_is_not_permitted(writer: Engine) -> None:
    """Writers hold no DELETE: they forget through memgov_forget."""
    with Session(writer) as session:
        item = memory("allowed")
        session.add(item)
        session.commit()
        session.delete(item)
        with pytest.raises(DBAPIError) as info:
            session.commit()
        assert isinstance(from_dbapi_error(info.value), NotPermittedError)


def test_a_held_orm_update_is_stale_data(writer: Engine, reviewer: Engine, su: psycopg.Connection[Any]) -> None:
    """An UPDATE the policy holds leaves the row as it is (0 rows): StaleDataError, rolled back."""
    with Session(writer) as session:
        item = memory("allowed", category="preference")  # 0.9: stored; lowered to 0.6 it is held
        session.add(item)
        session.commit()
        item.confidence = Decimal("0.6")
        with pytest.raises(StaleDataError):
            session.commit()
        assert [d.sqlstate for d in decisions(session)] == ["MG201"]
        session.rollback()
    assert count(su, "approval_requests") == 0


def test_a_held_core_update_is_a_notice_and_a_request(writer: Engine, su: psycopg.Connection[Any]) -> None:
    """The documented way around StaleDataError: a Core UPDATE, whose rowcount 0 is no error."""
    with Session(writer) as session:
        item = memory("allowed", category="preference")
        session.add(item)
        session.commit()
        result = session.execute(
            update(memory_items).where(memory_items.c.memory_id == item.memory_id).values(confidence=Decimal("0.6"))
        )
        assert result.rowcount == 0  # type: ignore[attr-defined]
        (noticed,) = decisions(session)
        assert noticed.action == "require_approval" and noticed.request_id is not None
        session.commit()
    assert count(su, "approval_requests") == 1


def test_a_denied_orm_flush_becomes_policy_denied(writer: Engine, su: psycopg.Connection[Any]) -> None:
    with Session(writer) as session:
        session.add(memory("denied"))
        with pytest.raises(DBAPIError) as info:
            session.commit()
        translated = from_dbapi_error(info.value)
        assert isinstance(translated, PolicyDeniedError)
        assert translated.rule_ids == ["block-secrets"] and translated.reason_codes == ["SECRET_DETECTED"]
        assert translated.decision["action"] == "deny" and translated.decision["decision_id"] is not None
        assert translated.sqlstate == "MG403" and translated.hint
        # the psycopg error itself, and a StatementError around it, give the same
        assert isinstance(info.value.orig, psycopg.Error)
        assert isinstance(from_dbapi_error(info.value.orig), PolicyDeniedError)
        wrapped = StatementError("x", "INSERT", None, info.value.orig)  # type: ignore[arg-type]
        assert isinstance(from_dbapi_error(wrapped), PolicyDeniedError)
        session.rollback()
    assert count(su, "long_term_memory_items") == 0


def test_the_other_tables_are_read_only(reviewer: Engine) -> None:
    with Session(reviewer) as session:
        session.add(QuarantineEntry(org_id=ORG, operation="remember", payload={}, decision={}))
        with pytest.raises(DBAPIError) as info:
            session.commit()
        assert isinstance(from_dbapi_error(info.value), NotPermittedError)


def test_other_errors_are_not_translated(writer: Engine) -> None:
    with Session(writer) as session:
        session.add(memory("allowed", category=""))  # CHECK (category <> ''): 23514
        with pytest.raises(DBAPIError) as info:
            session.commit()
        assert from_dbapi_error(info.value) is None
    assert from_dbapi_error(ValueError("nothing")) is None
    assert errors.from_dbapi_error(RuntimeError()) is None


def test_set_tenant_overrides_install_for_one_session(
    su: psycopg.Connection[Any], memgov_dsn: str, logins: Logins
) -> None:
    engine = install(login_engine(memgov_dsn, logins.gwriter))  # no tenant: sees and writes nothing
    try:
        with Session(engine) as session:
            with pytest.raises(DBAPIError) as info:
                session.scalar(memgov_remember(memory("allowed")))
            assert isinstance(from_dbapi_error(info.value), NotPermittedError)
            session.rollback()
            set_tenant(session, ORG)
            decision = session.scalar(memgov_remember(memory("allowed")))
            session.commit()
            assert decision is not None and decision.action == "allow"
            assert session.scalars(select(MemoryItem.memory_id)).all() == [decision.memory_id]
        with Session(engine) as other:
            assert other.scalars(select(MemoryItem.memory_id)).all() == []
    finally:
        engine.dispose()


def test_install_refuses_bad_input(memgov_dsn: str, logins: Logins) -> None:
    engine = login_engine(memgov_dsn, logins.writer)
    try:
        with pytest.raises(errors.MemgovError):
            install(engine, org_id="bad tenant!")
        install(engine)
        with pytest.raises(ValueError, match="already"):
            install(engine)
        with Session(engine) as session, pytest.raises(errors.MemgovError):
            set_tenant(session, "")
    finally:
        engine.dispose()


# -- governed reads --------------------------------------------------------------------------------


def test_search_and_get_return_a_typed_recall(writer: Engine, reviewer: Engine, su: psycopg.Connection[Any]) -> None:
    deploy_policy(su, "2.0.0", READ_POLICY)  # the attack policy with read rules
    with Session(writer) as w:
        stored = w.scalar(memgov_remember(memory("allowed")))
        sensitive = w.scalar(memgov_remember(memory("allowed", fact_text="green tea for an ulcer", is_sensitive=True)))
        w.commit()
    assert stored is not None and stored.memory_id is not None and sensitive is not None
    with Session(writer) as w:
        found = search(w, "green tea", limit=5)
        assert [m.memory_id for m in found.memories] == [stored.memory_id]
        assert isinstance(found.memories[0], RecalledMemory) and isinstance(found.memories[0].score, float)
        assert (found.returned, found.withheld, found.withheld_disclosed) == (1, 0, False)  # an agent is not told
        assert found.decision.action == "allow" and found.decision.decision_id is not None
        got = get(w, stored.memory_id)
        assert got.memory is not None and got.memory.fact_text == "likes green tea" and got.memory.score is None
        assert w.execute(memgov_search(query={"text": "green tea"})).all()[0].memory_id == stored.memory_id
        with pytest.raises(PolicyDeniedError) as denied:
            get(w, sensitive.memory_id)
        assert denied.value.rule_ids == ["withhold-sensitive"]
        w.rollback()
        held = search(w, "password: hunter2hunter2")  # a held read: a result, filed in this transaction
        assert held.memories == () and held.decision.action == "require_approval"
        w.commit()
        with pytest.raises(RecallHeldError):
            held.raise_for()
    with Session(reviewer) as r:  # a reviewer reads the log: it is told
        told = search(r, "green tea")
        assert (told.returned, told.withheld, told.withheld_disclosed) == (1, 1, True)
    assert su.execute("SELECT operation FROM memgov.approval_requests").fetchall() == [("search",)]
    with pytest.raises(TypeError, match="takes the text to look for"):
        memgov_search(42)  # type: ignore[arg-type]
