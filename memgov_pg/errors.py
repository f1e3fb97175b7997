"""Exceptions. ``MemgovError`` and its subclasses are user-facing: the CLI
prints their message as one line and exits non-zero.

The engine's refusals and conflicts (docs/reference.md, SQLSTATEs) have their
own classes, each with the ``sqlstate`` it stands for; :func:`from_dbapi_error`
turns a psycopg error, or a SQLAlchemy ``DBAPIError`` / ``StatementError``
wrapping one, into them.

:data:`SQLSTATES` lists every SQLSTATE the engine raises on purpose, once: its levels,
what it means, its exception class. The mapping of :func:`from_dbapi_error` and
:data:`BUSY_SQLSTATES` are read from it, and tests/unit/test_sqlstates.py holds the SQL
files, the migrations, ``memgov_pg/api.py`` and docs/reference.md's SQLSTATE table to it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar, Final, Literal

Decision = dict[str, Any]


class ExitCode(IntEnum):
    """The exit status of every ``memgov`` command (docs/operations.md, "Exit codes").

    ``memgov status --check`` is the one exception, a monitoring probe: 0 healthy,
    1 degraded, 2 unreachable.
    """

    OK = 0
    #: an error (one line on stderr), or findings: doctor, verify-log, a failing check
    FAILED = 1
    #: the command line is wrong: an unknown option, a malformed tenant id or anchor
    USAGE = 2
    #: another session holds what the command needs: a sweep in progress, a lock not
    #: granted within ``lock_timeout`` (SQLSTATE 55P03); nothing was done, try again later
    BUSY = 3
    #: Ctrl-C (SIGINT): committed work stays committed, the rest was rolled back
    INTERRUPTED = 130


class CheckStatus(IntEnum):
    """The exit status of ``memgov status --check``, as monitoring plugins use it."""

    HEALTHY = 0
    DEGRADED = 1
    UNREACHABLE = 2


class MemgovError(Exception):
    """A mistake the user can fix: the message says what to do next."""

    exit_code: int = ExitCode.FAILED


class BusyError(MemgovError):
    """Another session holds what the command needs; nothing was done: try again later (exit 3)."""

    exit_code = ExitCode.BUSY


class ConnectionFailed(MemgovError):
    """The database could not be reached or refused the login."""


class ClusterError(MemgovError):
    """The embedded or test PostgreSQL cluster could not be set up, started or stopped."""


class TenantRequiredError(MemgovError):
    """An engine call without a tenant: give ``org_id=`` to the engine or use ``engine.for_tenant(org)``.

    Raised before the database is touched (row level security would refuse the call anyway).
    """

    sqlstate: ClassVar[str | None] = None


class EngineError(MemgovError):
    """A refusal or conflict raised by the SQL engine; ``sqlstate`` says which."""

    sqlstate: str = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class PolicyDeniedError(EngineError):
    """The active policy refused a write or a read (SQLSTATE MG403).

    ``decision`` is the decision as JSON (the error's DETAIL), ``rule_ids`` its
    ``matched_rule_ids`` and ``reason_codes`` its reason codes; a denial without
    a decision (a TRUNCATE) has an empty one.
    """

    sqlstate = "MG403"

    def __init__(self, decision: Decision, message: str | None = None, *, hint: str | None = None) -> None:
        self.decision = decision
        self.rule_ids: list[str] = list(decision.get("matched_rule_ids") or [])
        self.reason_codes: list[str] = list(decision.get("reason_codes") or [])
        if message is None:
            rules = ", ".join(self.rule_ids) or "on_policy_miss"
            message = f"denied by rule {rules} [{', '.join(self.reason_codes)}]"
        super().__init__(message, hint=hint)

    @property
    def rule_id(self) -> str | None:
        """The first rule that matched, or None (no rule: ``on_policy_miss``, or no decision)."""
        return self.rule_ids[0] if self.rule_ids else None


class QuarantinedError(EngineError):
    """The active policy diverted a write to memgov.quarantine (SQLSTATE MG202)."""

    sqlstate = "MG202"

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        self.quarantine_id: str | None = decision.get("quarantine_id")
        self.rule_ids: list[str] = list(decision.get("matched_rule_ids") or [])
        self.reason_codes: list[str] = list(decision.get("reason_codes") or [])
        super().__init__(f"quarantined ({self.quarantine_id}) by rule {', '.join(self.rule_ids) or 'on_policy_miss'}")


class HeldForApprovalError(EngineError):
    """A write waits for a reviewer (SQLSTATE MG201, a notice: the engine never raises it).
    ``memgov_pg.sqlalchemy.Decision.raise_for(held=True)`` raises it for callers that
    want a held write to be an exception."""

    sqlstate = "MG201"

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        self.request_id: str | None = decision.get("request_id")
        self.rule_ids: list[str] = list(decision.get("matched_rule_ids") or [])
        self.reason_codes: list[str] = list(decision.get("reason_codes") or [])
        super().__init__(f"held for approval (request {self.request_id})")


class RecallRefusedError(EngineError):
    """A search or get the policy refused without an error (a notice of ``memgov.search``
    / ``memgov.get``): nothing was returned, and the read was filed (``filed_as``). The
    base of :class:`RecallHeldError` and :class:`RecallQuarantinedError`."""

    refusal: ClassVar[str]
    filed_as: ClassVar[str]

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        self.rule_ids: list[str] = list(decision.get("matched_rule_ids") or [])
        self.reason_codes: list[str] = list(decision.get("reason_codes") or [])
        rules = ", ".join(self.rule_ids) or "on_policy_miss"
        super().__init__(f"recall {self.refusal} ({self.filed_as} {decision.get(self.filed_as)}) by rule {rules}")


class RecallHeldError(RecallRefusedError):
    """The active policy holds a search or get for approval (SQLSTATE MG203): the read waits
    in memgov.approval_requests for reviewers to see (it is never replayed)."""

    sqlstate = "MG203"
    refusal = "held for approval"
    filed_as = "request_id"

    @property
    def request_id(self) -> str | None:
        """The approval request the read was filed as."""
        return self.decision.get("request_id")


class RecallQuarantinedError(RecallRefusedError):
    """The active policy quarantines a search or get (SQLSTATE MG204): the read waits in
    memgov.quarantine (it is never released)."""

    sqlstate = "MG204"
    refusal = "quarantined"
    filed_as = "quarantine_id"

    @property
    def quarantine_id(self) -> str | None:
        """The quarantine entry the read was filed as."""
        return self.decision.get("quarantine_id")


class NotFoundError(EngineError):
    """No such memory, request or quarantine entry in the caller's tenant (SQLSTATE MG404)."""

    sqlstate = "MG404"


class ConflictError(EngineError):
    """A conflict with the current state: a pending memory, a decided request ... (SQLSTATE MG409)."""

    sqlstate = "MG409"


class NotPermittedError(EngineError):
    """Another tenant's row, an engine column, one's own request, a function not granted (SQLSTATE 42501)."""

    sqlstate = "42501"


class SQLError(EngineError):
    """Any other error the database raised in an engine call (54000 an oversized item, 22023 a
    malformed value, 23514 a failed check …): ``sqlstate`` is the database's, ``hint`` its HINT,
    and the psycopg error is ``__cause__``."""

    def __init__(self, message: str, sqlstate: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.sqlstate = sqlstate


Level = Literal["ERROR", "WARNING", "NOTICE"]


@dataclass(frozen=True)
class SQLState:
    """One SQLSTATE the engine raises on purpose.

    ``origin``: ``raised`` by a ``RAISE`` of sql/*.sql (the live schema); ``migration``, by one
    of a migration's hand-written steps only (alembic/versions/*.sql); ``constraint``,
    PostgreSQL's own for a constraint of the schema; ``internal``, raised and caught inside
    the engine (no caller sees it, and docs/reference.md does not list it).
    """

    code: str
    levels: tuple[Level, ...]  # as raised: RAISE EXCEPTION is ERROR
    meaning: str  # a few words; docs/reference.md says when and what to do
    exception: type[EngineError] | None = None  # what from_dbapi_error or a notice reader makes of it
    origin: Literal["raised", "migration", "constraint", "internal"] = "raised"
    busy: bool = False  # "try again later": the CLI exits 3 (ExitCode.BUSY)


_E: Final = ("ERROR",)

#: Every SQLSTATE the engine raises on purpose, in docs/reference.md's order. To add one:
#: a row here, a row in docs/reference.md's SQLSTATE table, then the RAISE.
SQLSTATES: Final[tuple[SQLState, ...]] = (
    SQLState("MG201", ("NOTICE",), "a write held for approval", HeldForApprovalError),
    SQLState("MG202", ("NOTICE",), "a write quarantined", QuarantinedError),
    SQLState("MG203", ("NOTICE",), "a search or get held for approval", RecallHeldError),
    SQLState("MG204", ("NOTICE",), "a search or get quarantined", RecallQuarantinedError),
    SQLState("MG403", _E, "the policy denies a write or a read", PolicyDeniedError),
    SQLState("MG404", _E, "no such memory, request, entry or version in the tenant", NotFoundError),
    SQLState("MG409", ("ERROR", "NOTICE", "WARNING"), "a conflict with the current state", ConflictError),
    SQLState("MG500", _E, "PostgreSQL rejected a compiled policy: a compiler bug"),
    SQLState("MG503", _E, "a read on a standby whose primary cannot be reached to log it"),
    SQLState("MG000", _E, "undoes definition_drift's scratch function", origin="internal"),
    SQLState("MG299", _E, "undoes a replay's shadow and its decisions", origin="internal"),
    SQLState("0A000", _E, "a write of the memory table from inside another statement's functions"),
    SQLState("22004", _E, "memgov.edit with a NULL text"),
    SQLState("22023", _E, "a bad argument"),
    SQLState("23502", _E, "a NOT NULL column missing", origin="constraint"),
    SQLState("23505", _E, "a memory_id that exists, or a (namespace, item_key) taken", origin="constraint"),
    SQLState("23514", _E, "a value outside a CHECK", origin="constraint"),
    SQLState("25001", _E, "a tenant grant changed in a REPEATABLE READ or SERIALIZABLE transaction"),
    SQLState("25006", _E, "a governed read on a standby or in a READ ONLY transaction"),
    SQLState("42501", _E, "not permitted: another tenant, an engine column, one's own request", NotPermittedError),
    SQLState("42704", _E, "memgov.grant_tenant names no role"),
    SQLState("54000", _E, "an item over the size limits"),
    SQLState("55000", _E, "a downgrade that would lose the decision log's bulk decisions", origin="migration"),
    SQLState("55P03", _E, "busy: the maintenance lease, or a lock not granted within lock_timeout", busy=True),
    SQLState("XX000", _E, "an engine invariant broke: a memgov bug"),
)

#: each code's entry
BY_SQLSTATE: Final[dict[str, SQLState]] = {s.code: s for s in SQLSTATES}

#: SQLSTATEs that mean "busy, try again": lock_not_available (``lock_timeout``, ``NOWAIT``)
BUSY_SQLSTATES: Final = frozenset(s.code for s in SQLSTATES if s.busy)

#: the exception of each error code that has one (MG403 carries its decision: from_dbapi_error)
_BY_SQLSTATE: Final[dict[str, type[EngineError]]] = {
    s.code: s.exception for s in SQLSTATES if s.exception is not None and "ERROR" in s.levels
}


def _dbapi_error(exc: BaseException) -> Any:
    """The psycopg error behind ``exc`` (itself, or what a SQLAlchemy exception wraps), else None."""
    import psycopg

    seen: set[int] = set()
    current: Any = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, psycopg.Error):
            return current
        # sqlalchemy.exc.DBAPIError / StatementError keep the driver's error in .orig
        current = getattr(current, "orig", None) or current.__cause__
    return None


def _decision(detail: str | None) -> Decision:
    if not detail:
        return {}
    try:
        value = json.loads(detail)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def engine_error(exc: BaseException) -> MemgovError | None:
    """Like :func:`from_dbapi_error`, but every database error becomes a :class:`MemgovError`:
    one without a SQLSTATE (the connection was lost, the pool timed out) a :class:`ConnectionFailed`,
    any other SQLSTATE a :class:`SQLError`. None when ``exc`` holds no database error."""
    known = from_dbapi_error(exc)
    if known is not None:
        return known
    error = _dbapi_error(exc)
    if error is None:
        return None
    message = (error.diag.message_primary or str(error).strip() or type(error).__name__).removeprefix("memgov: ")
    result: MemgovError
    if error.sqlstate is None:
        result = ConnectionFailed(message)
    else:
        result = SQLError(message, error.sqlstate, hint=error.diag.message_hint)
    result.__cause__ = error
    return result


def from_dbapi_error(exc: BaseException) -> EngineError | None:
    """The memgov exception for a database error whose SQLSTATE has one in :data:`SQLSTATES`:
    MG403, MG404, MG409 or 42501.

    ``exc`` is a psycopg error, or a SQLAlchemy exception wrapping one (``DBAPIError``,
    ``StatementError``, an ORM flush's error). Anything else, or another SQLSTATE,
    returns None::

        try:
            session.commit()
        except sqlalchemy.exc.DBAPIError as exc:
            raise from_dbapi_error(exc) or exc
    """
    error = _dbapi_error(exc)
    if error is None or error.sqlstate is None:
        return None
    diag = error.diag
    message = (diag.message_primary or str(error)).removeprefix("memgov: ")
    hint = diag.message_hint
    result: EngineError
    cls = _BY_SQLSTATE.get(error.sqlstate)
    if cls is None:
        return None
    if cls is PolicyDeniedError:
        result = PolicyDeniedError(_decision(diag.message_detail), message, hint=hint)
    else:
        result = cls(message, hint=hint)
    result.__cause__ = error
    return result


__all__ = [
    "BUSY_SQLSTATES",
    "BY_SQLSTATE",
    "SQLSTATES",
    "BusyError",
    "CheckStatus",
    "ClusterError",
    "ConflictError",
    "ConnectionFailed",
    "EngineError",
    "ExitCode",
    "HeldForApprovalError",
    "MemgovError",
    "NotFoundError",
    "NotPermittedError",
    "PolicyDeniedError",
    "QuarantinedError",
    "RecallHeldError",
    "RecallQuarantinedError",
    "RecallRefusedError",
    "SQLError",
    "SQLState",
    "TenantRequiredError",
    "engine_error",
    "from_dbapi_error",
]
