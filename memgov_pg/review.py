"""The review queues as reviewers read them: approval requests and quarantine entries as typed,
frozen records, and the one transaction ``memgov approvals`` / ``memgov quarantine`` run in.

Everything here reads through what the login may see: row level security gives a reviewer
the rows of its session's tenant (``memgov.org_id``, from ``--tenant`` or the engine's
tenant) and an admin every tenant's. Deciding a request or an entry is the SQL functions'
(``memgov.approve``, ``deny``, ``release_quarantine``, ``purge_quarantine``), which hold
four eyes: never the login that made the write.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from .decisions import Decision
from .errors import ExitCode, MemgovError, NotFoundError, NotPermittedError
from .resources import query

if TYPE_CHECKING:  # the records need no database driver
    import psycopg

#: The statuses of an approval request and of a quarantine entry (the columns' domains).
REQUEST_STATUSES: Final = ("pending", "approved", "denied", "expired")
QUARANTINE_STATUSES: Final = ("held", "released", "purged")
#: The columns of a memory its writer chooses (memgov.content_of): what a payload is shown by.
WRITER_COLUMNS: Final = (
    "memory_id", "org_id", "project_id", "agent_id", "subject_id", "session_id", "category", "fact_text",
    "source", "confidence", "is_sensitive", "retention_policy", "context_source", "metadata",
)  # fmt: skip
#: The most rows one list returns.
MAX_LIMIT: Final = 1000


class TenantNeeded(MemgovError):
    """A reviewer's command without ``--tenant``: reviewers act in one tenant (exit 2, usage)."""

    exit_code = ExitCode.USAGE


def _mapping(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _json(value: Any) -> Any:
    if isinstance(value, Decision):
        return dict(value.raw)
    if isinstance(value, Mapping):
        return dict(value)
    return value


def changes(payload: Mapping[str, Any], current: Mapping[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """``(column, now, in the payload)`` for each writer column an update changes; [] without
    the memory as it is now."""
    if current is None:
        return []
    return [(c, current.get(c), payload.get(c)) for c in WRITER_COLUMNS if current.get(c) != payload.get(c)]


@dataclass(frozen=True)
class _Record:
    def as_json(self) -> dict[str, Any]:
        """The record as JSON-ready values (the decision as its JSON), in column order."""
        return {f.name: _json(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class ApprovalRecord(_Record):
    """A row of ``memgov.approval_requests``: a held write (or a held read, a record that is
    never replayed). ``payload`` is the write as it was made, which an approval applies;
    ``decision`` the logged decision that held it (None when the log row is archived);
    ``current`` for a held update, the memory as it is now."""

    request_id: uuid.UUID
    org_id: str
    operation: str
    status: str
    memory_id: uuid.UUID | None
    payload: Mapping[str, Any]
    requested_at: datetime
    requested_by: str
    requested_login: str
    decided_at: datetime | None = None
    decided_by: str | None = None
    decided_login: str | None = None
    note: str | None = None
    decision_id: int | None = None
    policy_version: str | None = None
    decision: Decision | None = None
    current: Mapping[str, Any] | None = field(default=None, repr=False)

    def changes(self) -> list[tuple[str, Any, Any]]:
        """For an update: ``(column, now, in the payload)`` for each writer column it changes."""
        return changes(self.payload, self.current)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ApprovalRecord:
        """The record of a row of the ``approvals_list`` query."""
        values: dict[str, Any] = {f.name: row.get(f.name) for f in fields(cls)}
        values["decision"] = Decision.from_json(row["decision"]) if _mapping(row.get("decision")) else None
        values["payload"] = _mapping(row.get("payload")) or {}
        return cls(**values)


@dataclass(frozen=True)
class QuarantineRecord(_Record):
    """A row of ``memgov.quarantine``: a diverted write (or read). ``payload`` is the write as it
    was made, which a release applies (``{"purged": true}`` once purged); ``decision`` the
    decision that diverted it; ``current`` for an update, the memory as it is now."""

    quarantine_id: uuid.UUID
    org_id: str
    operation: str
    status: str
    memory_id: uuid.UUID | None
    payload: Mapping[str, Any]
    decision: Decision
    quarantined_at: datetime
    quarantined_by: str
    quarantined_login: str
    decision_id: int | None = None
    resolved_at: datetime | None = None
    resolved_by: str | None = None
    resolved_login: str | None = None
    current: Mapping[str, Any] | None = field(default=None, repr=False)

    def changes(self) -> list[tuple[str, Any, Any]]:
        """For an update: ``(column, now, in the payload)`` for each writer column it changes."""
        return changes(self.payload, self.current)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> QuarantineRecord:
        """The record of a row of the ``quarantine_list`` query."""
        values: dict[str, Any] = {f.name: row.get(f.name) for f in fields(cls)}
        values["decision"] = Decision.from_json(_mapping(row.get("decision")) or {})
        values["payload"] = _mapping(row.get("payload")) or {}
        return cls(**values)

    @property
    def purged(self) -> bool:
        """Whether the payload was erased (``memgov.purge_quarantine``)."""
        return self.status == "purged"


def list_params(
    statuses: tuple[str, ...], status: str | None, limit: int, org_id: str | None, entry_id: uuid.UUID | str | None
) -> dict[str, Any]:
    """The parameters of ``approvals_list`` / ``quarantine_list``; ValueError / TypeError for misuse."""
    if status is not None and status not in statuses:
        raise ValueError(f"status is one of {', '.join(statuses)}, or None for every status; not {status!r}")
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise TypeError(f"limit is an int, not {type(limit).__name__}")
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit is 1 to {MAX_LIMIT}, not {limit}")
    if entry_id is not None and not isinstance(entry_id, uuid.UUID | str):
        raise TypeError(f"an id is a uuid.UUID or its text, not {type(entry_id).__name__}")
    return {"org_id": org_id, "status": status, "limit": limit,
            "id": None if entry_id is None else str(entry_id)}  # fmt: skip


def not_found(what: str, entry_id: uuid.UUID | str, org_id: str | None) -> NotFoundError:
    """MG404, as the SQL functions say it: another tenant's ids look the same as missing ones."""
    where = f"tenant {org_id}" if org_id else "any tenant"
    return NotFoundError(
        f"{what} {entry_id} does not exist in {where}", hint=f"check the id, and the tenant of the {what}"
    )


# -- the command line's transaction ------------------------------------------------------------


@contextmanager
def reviewing(dsn: str, tenant: str | None) -> Iterator[psycopg.Connection[Any]]:
    """One transaction as the login of ``dsn``, acting in ``tenant``, committed at the end.

    Refused before anything is read: a login that is neither a reviewer nor an admin
    (NotPermittedError), a reviewer without a tenant (TenantNeeded, exit 2), a reviewer not
    bound to ``tenant`` (NotPermittedError).
    """
    from .db import connect

    with connect(dsn) as conn:
        row = conn.execute(query("review_caller")).fetchone()
        assert row is not None
        login, admin, reviewer = row
        if not (admin or reviewer):
            raise NotPermittedError(
                f"login {login} may not review: it is a member of neither memgov_reviewer nor memgov_admin",
                hint="an administrator grants memgov_reviewer to the login",
            )
        if tenant is None and not admin:
            raise TenantNeeded(f"login {login} is a reviewer: it acts in one tenant; give --tenant ORG")
        if tenant is not None:
            conn.execute(query("set_tenant"), {"org_id": tenant})
            acting = conn.execute(query("session_tenant")).fetchone()
            if not admin and (acting is None or acting[0] != tenant):
                raise NotPermittedError(
                    f"login {login} is not bound to tenant {tenant}",
                    hint=f"an administrator binds it: memgov tenant grant {login} {tenant}",
                )
        yield conn
        conn.commit()


__all__ = [
    "QUARANTINE_STATUSES",
    "REQUEST_STATUSES",
    "WRITER_COLUMNS",
    "ApprovalRecord",
    "QuarantineRecord",
    "TenantNeeded",
    "changes",
    "list_params",
    "not_found",
    "reviewing",
]
