"""A service's use of memgov_pg's public API, as a user would write it.

Only type-checked (``mypy --strict``, tests/unit/test_typing.py), never run: it needs
a database. If a change to the package breaks it, the public API has changed.
"""

from __future__ import annotations

import uuid
from typing import assert_type

from memgov_pg import (
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
