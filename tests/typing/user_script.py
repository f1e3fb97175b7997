"""A service's use of memgov_pg's public API, as a user would write it.

Only type-checked (``mypy --strict``, tests/unit/test_typing.py), never run: it needs
a database. If a change to the package breaks it, the public API has changed.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any, assert_type

from memgov_pg import (
    ApprovalRecord,
    ConflictError,
    ConnectionFailed,
    Decision,
    EngineError,
    FeedbackResult,
    HeldForApprovalError,
    Item,
    MemgovError,
    MemoryPolicyEngine,
    NotFoundError,
    PolicyDeniedError,
    QuarantinedError,
    QuarantineRecord,
    QuarantineResult,
    Recall,
    RecalledMemory,
    ReviewResult,
    SyncMemoryPolicyEngine,
    TenantRequiredError,
)

FACT: Item = {
    "org_id": "acme",
    "agent_id": "assistant-1",
    "subject_id": "olena",
    "category": "preference",
    "fact_text": "Prefers dark mode",
    "source": "agent_extracted",
    "confidence": 0.85,
}


async def remember(dsn: str) -> uuid.UUID | None:
    """Connect a pooled engine, remember a fact, and handle each refusal."""
    try:
        engine = await MemoryPolicyEngine.connect(dsn, org_id="acme", max_size=8)
    except ConnectionFailed as exc:
        print(f"database unavailable: {exc}")
        return None
    async with engine:
        assert_type(engine, MemoryPolicyEngine)
        try:
            decision = await engine.remember(FACT)
        except PolicyDeniedError as exc:
            assert_type(exc.rule_ids, list[str])
            assert_type(exc.rule_id, str | None)
            assert_type(exc.reason_codes, list[str])
            print(f"denied by {', '.join(exc.rule_ids)}: {exc} ({exc.sqlstate}, hint {exc.hint})")
            return None
        except QuarantinedError as exc:
            assert_type(exc.quarantine_id, str | None)
            return None
        assert_type(decision, Decision)
        assert_type(decision.action, str)
        assert_type(decision.applied, str)
        assert_type(decision.memory_id, uuid.UUID | None)
        assert_type(decision.request_id, uuid.UUID | None)
        assert_type(decision.matched_rule_ids, tuple[str, ...])
        if decision.action == "require_approval" and decision.request_id is not None:
            review = await engine.approve(decision.request_id, note="checked")
            assert_type(review, ReviewResult)
            assert_type(review.status, str)
            assert_type(review.decision, Decision | None)
        assert_type(review.policy_action, str | None)
        assert_type(review.memory_id, uuid.UUID | None)

        # the same pool, another tenant
        globex = engine.for_tenant("globex")
        assert_type(globex, MemoryPolicyEngine)
        dry_run = await globex.evaluate(FACT, "remember")
        assert_type(dry_run.risk_level, str | None)
        assert_type(await globex.should_store_in_long_term(FACT), bool)
        return decision.memory_id


def review(dsn: str, memory_id: uuid.UUID | str) -> None:
    """The sync engine: a reviewer confirms and edits a memory."""
    with SyncMemoryPolicyEngine.connect(dsn, org_id="acme") as engine:
        assert_type(engine, SyncMemoryPolicyEngine)
        try:
            feedback = engine.confirm(memory_id)
            assert_type(feedback, FeedbackResult)
            assert_type(feedback.outcome, str | None)
            edited = engine.edit(memory_id, "Prefers dark mode in every editor")
            assert_type(edited.decision, Decision | None)
            held = engine.for_tenant("globex").remember(FACT, raise_on_hold=True)
            assert_type(held.memory_id, uuid.UUID | None)
        except HeldForApprovalError as exc:
            assert_type(exc.request_id, str | None)
        except (NotFoundError, ConflictError) as exc:
            assert_type(exc, NotFoundError | ConflictError)
            print(exc.sqlstate, exc.hint)
        except TenantRequiredError:
            raise
        except EngineError as exc:
            assert_type(exc.sqlstate, str)
        except MemgovError as exc:
            print(f"memgov: {exc} (exit {exc.exit_code})")


def recall_and_review(dsn: str) -> None:
    """The sync engine: an item without org_id, a search by text, the review queues."""
    with SyncMemoryPolicyEngine.connect(dsn, org_id="acme") as engine:
        engine.remember({"category": "user_fact", "fact_text": "Works on Atlas", "source": "agent_extracted",
                         "confidence": 0.9})  # fmt: skip
        recall = engine.search("Atlas", project_id="atlas", limit=5)
        assert_type(recall, Recall)
        assert_type(recall.withheld, int)
        assert_type(recall.withheld_disclosed, bool)
        for memory in recall.memories:
            assert_type(memory, RecalledMemory)
            assert_type(memory.memory_id, uuid.UUID)
            assert_type(memory.confidence, Decimal)
            assert_type(memory.score, float | None)
            assert_type(memory.created_at, datetime)
        assert_type(engine.get(uuid.uuid4()).memory, RecalledMemory | None)
        for request in engine.list_approvals():
            assert_type(request, ApprovalRecord)
            assert_type(request.decision, Decision | None)
            assert_type(engine.approve(request.request_id, note="seen"), ReviewResult)
        for entry in engine.list_quarantine(None, limit=10):
            assert_type(entry, QuarantineRecord)
            assert_type(entry.changes(), list[tuple[str, Any, Any]])
            assert_type(engine.purge_quarantine(entry.quarantine_id), QuarantineResult)
        assert_type(engine.show_quarantine(uuid.uuid4()).purged, bool)
