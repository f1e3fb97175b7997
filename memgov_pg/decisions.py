"""The engine's results as typed, frozen values: :class:`Decision` (a policy decision, from a
function's result or a notice), :class:`ReviewResult` (approve / deny), :class:`FeedbackResult`
(confirm / reject / edit), :class:`QuarantineResult` and :class:`Recall` (search / get, its rows
:class:`RecalledMemory`).

Shared by :mod:`memgov_pg.engine` and :mod:`memgov_pg.sqlalchemy`. Each keeps the JSON it was
read from in ``raw``; ``result["key"]`` and ``result.get("key")`` read it, as the dictionaries
these results replace did.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from decimal import Decimal
from typing import Any

from .errors import (
    HeldForApprovalError,
    PolicyDeniedError,
    QuarantinedError,
    RecallHeldError,
    RecallQuarantinedError,
)


class _RawAccess:
    """``result["key"]`` / ``result.get("key")``: the field of the JSON the result was read from."""

    raw: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        """The value of ``key`` in the JSON result (KeyError when absent)."""
        return self.raw[key]

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key`` in the JSON result, else ``default``."""
        return self.raw.get(key, default)


def _uuid(value: Any) -> uuid.UUID | None:
    return None if value is None else uuid.UUID(str(value))


def _decimal(value: Any) -> Decimal | None:
    return None if value is None else Decimal(str(value))


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value or ())


@dataclass(frozen=True)
class Decision(_RawAccess):
    """A decision of the engine (docs/reference.md, Decisions), from a function's result or a notice.

    ``action`` is what the policy says; ``applied`` what was done (``allow`` when the
    decision is not enforced: monitor mode). ``sqlstate`` is MG201 / MG202 for a
    decision read from a notice, None for a function's result.
    """

    action: str
    reason_codes: tuple[str, ...] = ()
    matched_rule_ids: tuple[str, ...] = ()
    policy_version: str | None = None
    mode: str | None = None
    enforced: bool = True
    risk_score: Decimal | None = None
    risk_level: str | None = None
    decision_id: int | None = None
    memory_id: uuid.UUID | None = None
    request_id: uuid.UUID | None = None
    quarantine_id: uuid.UUID | None = None
    sqlstate: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], sqlstate: str | None = None) -> Decision:
        """The decision in a function's JSON result, or a notice's DETAIL (``sqlstate`` MG201 / MG202)."""
        decision_id = data.get("decision_id")
        return cls(
            action=str(data.get("action")),
            reason_codes=_strings(data.get("reason_codes")),
            matched_rule_ids=_strings(data.get("matched_rule_ids")),
            policy_version=data.get("policy_version"),
            mode=data.get("mode"),
            enforced=bool(data.get("enforced", True)),
            risk_score=_decimal(data.get("risk_score")),
            risk_level=data.get("risk_level"),
            decision_id=None if decision_id is None else int(decision_id),
            memory_id=_uuid(data.get("memory_id")),
            request_id=_uuid(data.get("request_id")),
            quarantine_id=_uuid(data.get("quarantine_id")),
            sqlstate=sqlstate,
            raw=dict(data),
        )

    @property
    def applied(self) -> str:
        """What was done: ``action`` when the decision is enforced, ``allow`` otherwise (monitor mode)."""
        return self.action if self.enforced else "allow"

    def raise_for(self, *, held: bool = False) -> Decision:
        """Raise PolicyDeniedError / QuarantinedError (and HeldForApprovalError with ``held``) for
        an enforced refusal; return the decision otherwise."""
        if self.applied == "deny":
            raise PolicyDeniedError(dict(self.raw))
        if self.applied == "quarantine":
            raise QuarantinedError(dict(self.raw))
        if held and self.applied == "require_approval":
            raise HeldForApprovalError(dict(self.raw))
        return self


def _decision_or_none(value: Any) -> Decision | None:
    return Decision.from_json(value) if isinstance(value, Mapping) else None


@dataclass(frozen=True)
class ReviewResult(_RawAccess):
    """``memgov.approve`` / ``memgov.deny``: the request's new status (``approved`` or ``denied``)
    and, for an approval, the decision taken: ``decision.action`` is ``allow`` when the write
    was applied and ``deny`` when the current policy, deciding it again, refused it;
    ``policy_action`` is what that policy said (``require_approval`` for a write it still
    holds: the reviewer's approval is what lets it through)."""

    request_id: uuid.UUID | None
    status: str
    decision: Decision | None = None
    memory_id: uuid.UUID | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReviewResult:
        """The result of ``memgov.approve`` / ``memgov.deny`` from its JSON."""
        return cls(_uuid(data.get("request_id")), str(data.get("status")), _decision_or_none(data.get("decision")),
                   _uuid(data.get("memory_id")), dict(data))  # fmt: skip

    @property
    def policy_action(self) -> str | None:
        """The action of the current policy's decision on approval (None for a deny)."""
        return None if self.decision is None else self.decision.get("policy_action")


@dataclass(frozen=True)
class QuarantineResult(_RawAccess):
    """``memgov.release_quarantine`` / ``memgov.purge_quarantine``: ``released`` or ``purged``."""

    quarantine_id: uuid.UUID | None
    status: str
    memory_id: uuid.UUID | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QuarantineResult:
        """The result of ``memgov.release_quarantine`` / ``memgov.purge_quarantine`` from its JSON."""
        return cls(_uuid(data.get("quarantine_id")), str(data.get("status")), _uuid(data.get("memory_id")), dict(data))


@dataclass(frozen=True)
class FeedbackResult(_RawAccess):
    """``memgov.confirm`` / ``reject`` / ``edit``: the feedback event and its ``outcome``
    (confirm: confirmed, approved, refused; reject: lowered, deleted, refused; edit: the
    action applied). ``decision``: edit's decision, or the policy's refusal of a pending
    memory's confirmation."""

    memory_id: uuid.UUID | None
    kind: str
    outcome: str | None
    event_id: int | None = None
    confidence_before: Decimal | None = None
    confidence_after: Decimal | None = None
    decision: Decision | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FeedbackResult:
        """The result of ``memgov.confirm`` / ``reject`` / ``edit`` from its JSON (edit's decision included)."""
        decision = data.get("decision")
        if decision is None and "action" in data:  # edit: the decision and the feedback in one object
            decision = data
        event_id = data.get("event_id")
        return cls(
            memory_id=_uuid(data.get("memory_id")),
            kind=str(data.get("kind")),
            outcome=data.get("outcome"),
            event_id=None if event_id is None else int(event_id),
            confidence_before=_decimal(data.get("confidence_before")),
            confidence_after=_decimal(data.get("confidence_after")),
            decision=_decision_or_none(decision),
            raw=dict(data),
        )


@dataclass(frozen=True)
class RecalledMemory:
    """One memory a search or get returned (``memgov.recalled``): its columns, the engine's
    search columns aside, and its ``score`` (None from a get). ``memory["fact_text"]`` and
    ``memory.get("score")`` read the same fields, as the mappings these rows replace did."""

    memory_id: uuid.UUID
    org_id: str
    project_id: str | None
    agent_id: str | None
    subject_id: str | None
    session_id: str | None
    category: str
    fact_text: str
    source: str
    confidence: Decimal
    is_sensitive: bool
    retention_policy: str
    context_source: str | None
    metadata: Mapping[str, Any]
    created_at: datetime
    updated_at: datetime
    last_confirmed_at: datetime | None
    expires_at: datetime | None
    policy_version: str | None
    decision_id: int | None
    score: float | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RecalledMemory:
        """The memory in a row of ``memgov.search`` / ``memgov.get`` (columns by name)."""
        values: dict[str, Any] = {name: row.get(name) for name in _RECALLED_FIELDS}
        return cls(**values)

    def __getitem__(self, key: str) -> Any:
        """The field ``key`` (KeyError for a name that is not a field)."""
        if key not in _RECALLED_FIELDS:
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        """The field ``key``, else ``default``."""
        return getattr(self, key) if key in _RECALLED_FIELDS else default

    def as_dict(self) -> dict[str, Any]:
        """The fields as a dictionary, in column order."""
        return {name: getattr(self, name) for name in _RECALLED_FIELDS}


#: The columns of ``memgov.recalled``, in order.
_RECALLED_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(RecalledMemory))


@dataclass(frozen=True)
class Recall:
    """``memgov.search`` / ``memgov.get``: the memories returned (:class:`RecalledMemory`, best
    first) and what the engine decided (``memgov.last_recall``): the search's (or get's)
    decision, how many memories were ``returned`` and how many a get decision ``withheld``.

    ``withheld`` is a count always. ``withheld_disclosed`` is False for a role that cannot
    read the decision log, under a policy that governs reads: an agent is not told how many
    rows it may not read, and its ``withheld`` is then 0 whatever was withheld."""

    memories: tuple[RecalledMemory, ...]
    decision: Decision
    returned: int = 0
    withheld: int = 0
    withheld_disclosed: bool = True

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]], outcome: Mapping[str, Any]) -> Recall:
        """The rows a recall function returned and the outcome it left in ``memgov.last_recall``."""
        withheld = outcome.get("withheld")
        return cls(tuple(RecalledMemory.from_row(r) for r in rows), Decision.from_json(outcome),
                   int(outcome.get("returned") or 0), int(withheld or 0), withheld is not None)  # fmt: skip

    @property
    def memory(self) -> RecalledMemory | None:
        """The one memory a get returned, else None."""
        return self.memories[0] if self.memories else None

    def raise_for(self) -> Recall:
        """Raise RecallHeldError / RecallQuarantinedError for a refused read (a deny raised
        PolicyDeniedError already); return the recall otherwise."""
        if self.decision.applied == "require_approval":
            raise RecallHeldError(dict(self.decision.raw))
        if self.decision.applied == "quarantine":
            raise RecallQuarantinedError(dict(self.decision.raw))
        return self


__all__ = ["Decision", "FeedbackResult", "QuarantineResult", "Recall", "RecalledMemory", "ReviewResult"]
